"""What the benchmarks share: starting and ending processes, the errors, and the tables and
numbers of the results pages. It imports no command's package and no study."""
