"""The mix of a generated workload, as `geops generate` and the benchmarks that generate one
take it: the share of point publications and one relation for every subscription."""

from __future__ import annotations

import argparse

from cli.errors import CommandError
from config.exitcodes import EXIT_USAGE
from geops.model import Relation
from geops.workload.generate import DEFAULT_POINT_SHARE


def add_mix_arguments(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument("--point-share", type=float, default=DEFAULT_POINT_SHARE, metavar="X",
                   help=f"share of point publications (default {DEFAULT_POINT_SHARE})")
    p.add_argument("--relation", metavar="NAME",
                   help="one relation for every subscription (default: uniform over the nine "
                        "non-DISJOINT relations)")


def relation_from(args: argparse.Namespace) -> Relation | None:
    """The --relation given, or None; a usage error naming it when it is no relation."""
    try:
        return None if args.relation is None else Relation.parse(args.relation)
    except ValueError as exc:
        raise CommandError(f"--relation: {exc}", EXIT_USAGE) from None


def point_share_from(args: argparse.Namespace) -> float:
    """The --point-share given; a usage error naming it outside [0, 1]."""
    if not 0.0 <= args.point_share <= 1.0:
        raise CommandError(f"--point-share must be in [0, 1], got {args.point_share}",
                           EXIT_USAGE)
    return args.point_share
