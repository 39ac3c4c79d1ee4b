"""Run every benchmark module (``bench/b_*.py``), print one table, write JSON.

    python bench/run.py [--only SUBSTRING] [--out bench/results/latest.json]

Figures are measured on this machine in this run; each target is a ratio to a baseline measured
in the same run where one exists (the peers doing the same work, the bare kernel wake, the bare
disk walk), so the verdict does not hang on how busy the machine was.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import Result, compare, settle, table  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", help="run only modules whose name contains this")
    ap.add_argument("--out", default=str(HERE / "results" / "latest.json"))
    args = ap.parse_args()
    rows: list[Result] = []
    modules = []
    for mod_path in sorted(HERE.glob("b_*.py")):
        if args.only and args.only not in mod_path.stem:
            continue
        spec = importlib.util.spec_from_file_location(mod_path.stem, mod_path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules.append((mod_path, module))
    # Modules that build and delete a 100,000-file fixture run last: the machine takes tens of
    # seconds to settle after one (measured: chat's sub-millisecond wake doubled right after the
    # tick module, on an idle CPU and disk), which would time that, not the next module's code.
    modules.sort(key=lambda m: bool(getattr(m[1], "HEAVY", False)))
    # Commands start as an installed package does, from byte-compiled modules: pip compiles a
    # wheel's modules at install, while a source checkout run with PYTHONDONTWRITEBYTECODE (set in
    # many CI and agent sandboxes) would recompile every edited module on every start and time
    # the compiler.
    import compileall

    import mailslot

    compileall.compile_dir(Path(mailslot.__file__).parent, quiet=1)
    for mod_path, module in modules:
        print(f"# {mod_path.stem} ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"mailslot-{mod_path.stem}-") as tmp:
            try:
                rows.extend(module.run(Path(tmp)))
            except Exception as e:  # one broken module must not hide the others' figures
                rows.append(
                    Result(mod_path.stem, "", note=f"ERROR {type(e).__name__}: {e}", ok=False)
                )
        settle()  # the next module starts with the disk quiet, not behind this one's cleanup
        print(f"#   {time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
    compare(rows)  # every ratio from this run's rows
    print(table(rows))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "machine": {
                    "python": platform.python_version(),
                    "platform": platform.platform(),
                    "cpus": __import__("os").cpu_count(),
                },
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "results": [r.to_json() for r in rows],
            },
            indent=2,
        )
    )
    print(f"\nwrote {out}", file=sys.stderr)
    return 1 if any(r.ok is False for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
