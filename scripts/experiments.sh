# experiments.sh: the shell helpers the steps of scripts/experiments.manifest call (sourced by scripts/record-results).

# mfiles NAME...: results/NAME.jsonl for each, one a line (the files a `harness model` step reads)
mfiles() { local f; for f in "$@"; do echo "$R/$f.jsonl"; done; }

# ceilings FILE PLOTS: the "# ceilings" table of `harness report FILE` (same-footing)
ceilings() { "$H" report "$1" --plots "$2" 2>/dev/null | sed -n '/# ceilings/,/^#$/p'; }
