# lib.sh - shared start of the scripts in this folder (sourced, not run).
#
#   cmb_dirs USAGE_ARGS "$@"   checks BUILD_DIR and OUT_DIR (the first two
#                              arguments), sets $build, $bin (the binary) and
#                              $out (created), or exits 2 with one line.
#   cmb_programs VAR "ALLOWED" "DEFAULT"
#                              sets $programs from the comma- or space-
#                              separated names in $VAR (DEFAULT when unset or
#                              empty), each one of ALLOWED, or exits 2 with
#                              one line.
cmb_dirs() {
    local usage=$1
    shift
    if [ $# -lt 2 ]; then
        echo "usage: $0 BUILD_DIR OUT_DIR $usage" >&2
        exit 2
    fi
    build=$(cd "$1" 2>/dev/null && pwd) || { echo "$0: no such build directory: $1" >&2; exit 2; }
    bin="$build/cumembench"
    [ -x "$bin" ] || { echo "$0: $bin is missing: build first (make build)" >&2; exit 2; }
    mkdir -p "$2" || exit 2
    out=$(cd "$2" && pwd)
}

cmb_programs() {
    local var=$1 allowed=$2 p
    programs=$(eval "echo \"\${$var:-$3}\"" | tr , ' ')
    for p in $programs; do
        case " $allowed " in *" $p "*) ;; *)
            echo "$0: $var: unknown program '$p' (expected $(echo $allowed | sed 's/ /, /g'))" >&2
            exit 2 ;;
        esac
    done
    [ -n "$(echo $programs)" ] || { echo "$0: $var names no program" >&2; exit 2; }
}
