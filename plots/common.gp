# common.gp - loaded by every plot script after it sets `need` (the columns
# it reads) and copies its arguments (`load` does not pass them on):
#
#   need = "series op requested_bytes"
#   script = ARG0; nargs = ARGC; datafile = ARG1; output = ARG2; title_text = ARG3
#   load system("dirname '".ARG0."'")."/common.gp"
#
# It checks the arguments and the columns (stopping with a clear
# error when one is missing), picks the terminal from the output's
# extension, and defines the helpers below.
#
#   gnuplot -c plots/<name>.gp DATA.csv OUT.png|OUT.svg ["title"]
#
# The data: comma-separated, a header line of column names (lines starting
# with '#' before it are comments), empty fields for values not measured.
# Rows of one series are contiguous and in x order: a line is drawn through
# consecutive rows only.

if (nargs < 2) {
    exit error sprintf("usage: gnuplot -c %s DATA.csv OUT.png|OUT.svg [\"title\"]", script)
}

header = system(sprintf("grep -v '^#' '%s' 2>/dev/null | head -n 1", datafile))
if (strlen(header) == 0) {
    exit error sprintf("%s: %s is missing or has no header line", script, datafile)
}
# the position (1-based) of a column in the header, 0 when absent
column_index(name) = (_h = ",".header.",", _p = strstrt(_h, ",".name.","), \
                      _p == 0 ? 0 : words(system(sprintf("echo '%s' | tr ',' ' '", _h[1:_p]))) + 1)
do for [i = 1:words(need)] {
    if (column_index(word(need, i)) == 0) {
        exit error sprintf("%s: %s has no column '%s' (needs: %s; has: %s)", script, datafile, word(need, i), need, header)
    }
}

# distinct values of a column, in order of appearance, space-separated
distinct(name) = system(sprintf("grep -v '^#' '%s' | awk -F, 'NR > 1 && $%d != \"\" && !seen[$%d]++ { print $%d }' | tr '\\n' ' '", \
                                datafile, column_index(name), column_index(name), column_index(name)))

set datafile separator comma
set datafile columnheaders
set datafile missing ""

if (output[strlen(output) - 3:] eq ".svg") {
    set terminal svg size 960, 600 dynamic noenhanced font "Helvetica,12" background "white"
} else {
    if (output[strlen(output) - 3:] eq ".png") {
        set terminal pngcairo size 960, 600 noenhanced font "Helvetica,10"
    } else {
        exit error sprintf("%s: output %s must end in .png or .svg", script, output)
    }
}
set output output
set key outside right top noenhanced
set grid
set title title_text noenhanced

# sizes on an axis in binary units
gib(x) = x / 1073741824.0
