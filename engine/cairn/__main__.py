"""`python -m cairn ...`: the `cairn` command line.

`python -m cairn hook EVENT` (what hooks/cairn-hook runs, by `python -c`) goes straight to the hook, without
importing click or the rest of the CLI: a hook's time budget is milliseconds.
"""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["hook"]:
        from cairn.adapters.claude.hook_process import hook_main

        hook_main(sys.argv[2:], hook_process=True)
    from cairn.adapters.cli import main

    main()
