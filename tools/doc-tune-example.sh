#!/bin/sh
# doc-tune-example.sh PART - the README's tune example, from the committed
# sim run results/sim/tune/convnet-4.75GiB.txt (results/sim/tune/make.sh),
# as a fenced block: `answer` the recommendation, what it saves and its
# time; `front` the search, the front, the candidates priced on the budget
# and why. Run by tools/gendocs.py.
f=results/sim/tune/convnet-4.75GiB.txt
[ -r "$f" ] || { echo "doc-tune-example.sh: $f is missing (sh results/sim/tune/make.sh)" >&2; exit 1; }
echo '```text'
case ${1:-} in
answer) sed -n '/^recommended/,/^time:/p' "$f" ;;
front)
    sed -n '/^recorded setting:/,/^searched/p' "$f"
    echo
    sed -n '/^Pareto front/,/^recommended/p' "$f" | sed '$d'
    echo "(recommended, saves, time: above)"
    sed -n '/^why:/,$p' "$f"
    ;;
*) echo "usage: $0 answer|front" >&2; exit 2 ;;
esac
echo '```'
