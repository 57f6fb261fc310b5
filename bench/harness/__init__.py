"""What the benchmarks share: the processes they start and end, the app on topics of its own,
the paced publisher and the monitor, the phases of a live stream, what ``/proc`` says of the
processes, and the CSV files, tables, plots and machine line of the results pages; one module a
job (docs/architecture.md, "The benchmarks"). It imports no command's package and no study."""
