#!/usr/bin/env bash
# The documentation compiles: every C example in the public headers' top comments and in the
# Markdown files (README.md, docs/*.md) is compiled and linked against the library built
# here, and the ones that are whole programs run; and pebble/pebble.h includes, and lists,
# every public header.
#
# usage: doc_examples.sh CC SOURCE_DIR LIBPEBBLE_SO [FLAG...]
#   FLAG...: extra compile and link flags (the build's -fsanitize=..., say)
#
# What counts as an example, and how it is compiled (the convention the headers follow):
#
# - In a header, the first comment of the file is the overview. A block there is a run of
#   lines indented 4 or more spaces past " * ", after a blank comment line. A block that
#   names something of pebble's (pbl_ or PBL_) and has a statement (a line ending in ";")
#   is a C example; any other block (a CSV or JSON layout, a table) is listed as skipped.
#   In Markdown, every ```c fence is a C example.
# - An example whose first lines are "// given DECLARATIONS" is a fragment of a larger
#   program: the declarations (what it assumes: a graph g, values x and w, ...) go at file
#   scope, the rest is the body of a function, and the result is compiled and linked, not
#   run (the given variables hold nothing).
# - An example with a line starting "int main(" is a whole program. Any other example (no
#   "given") is the body of main. Both are compiled, linked and run in a scratch directory,
#   and must exit with status 0.
# - "#include" lines at the start of an example go before the function; a line that is only
#   "..." stands for code left out and is dropped.
# - In a run example, a comment alone on its line that only states values, as in
#   "/* ws[0] ≈ 3, bs[0] ≈ -1 */" or "// b.used == 0", is checked at that point: each
#   comma-separated item is NAME == NUMBER (exactly) or NAME ≈ NUMBER (within 1% of
#   max(1, |NUMBER|)), NAME a variable, member or element (w, a.arena, p->n, ws[0]).
# - A block (or fence) after a paragraph ending in "prints:" is the exact standard output
#   of the run example before it.
#
# Each example becomes its own translation unit with #line directives, so a compiler error
# names the header (or README.md) and the line of the example.
set -u

cc=${1:?usage: doc_examples.sh CC SOURCE_DIR LIBPEBBLE_SO [FLAG...]}
src=${2:?usage: doc_examples.sh CC SOURCE_DIR LIBPEBBLE_SO [FLAG...]}
lib=${3:?usage: doc_examples.sh CC SOURCE_DIR LIBPEBBLE_SO [FLAG...]}
shift 3
extra=("$@")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/doc_examples.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=0
pass() {
    passed=$((passed + 1))
    echo "ok $passed - $*"
}
fail() {
    failed=$((failed + 1))
    echo "FAIL: $*"
}

cd "$src" || exit 1

# ---- pebble.h includes and lists every public header --------------------------------------

umbrella=include/pebble/pebble.h
for h in include/pebble/*.h; do
    b=${h##*/}
    [ "$b" = pebble.h ] && continue
    grep -q "^#include \"pebble/$b\"" "$umbrella" || fail "$umbrella does not #include \"pebble/$b\""
    # the overview lists each header as " *   NAME.h  what it holds"
    awk '/\*\//{exit} {print}' "$umbrella" | grep -q "^ \*   $b " ||
        fail "$umbrella's overview does not list $b"
done
[ $failed -eq 0 ] && pass "$umbrella includes and lists all $(($(ls include/pebble/*.h | wc -l) - 1)) other headers"

# ---- every header compiles on its own -----------------------------------------------------

cflags=(-std=c11 -pedantic -Wall -Wextra -Werror -Wno-unused-parameter -O1 -Iinclude)
for h in include/pebble/*.h; do
    printf '#include "pebble/%s"\n' "${h##*/}" >"$tmp/alone.c"
    "$cc" "${cflags[@]}" "${extra[@]}" -fsyntax-only "$tmp/alone.c" 2>"$tmp/err" ||
        { fail "$h does not compile on its own:"; cat "$tmp/err"; }
done
[ $failed -eq 0 ] && pass "every header in include/pebble compiles on its own (C11, -pedantic)"

# ---- extract the examples -----------------------------------------------------------------

# extract FILE KIND: writes $tmp/ex/N.c (and N.out, the expected output, where the text
# gives one) for every example in FILE, and a line "N<TAB>mode<TAB>FILE:LINE" per example to
# $tmp/ex/list (mode: compile or run); skipped blocks go to $tmp/ex/skipped.
mkdir -p "$tmp/ex"
extract() {
    awk -v file="$1" -v kind="$2" -v dir="$tmp/ex" '
    function emit_block(   i, n_given, has_main, is_c, t, name, out, mode, body0, k, m, items, it, op, pos, lhs, rhs, code, claimish, checks, names) {
        if (n == 0)
            return
        while (n > 0 && L[n] ~ /^[ \t]*$/)
            n--
        if (n == 0)
            return
        if (prints) { # the expected output of the previous example
            if (last_name == "") {
                print "error " file ":" S[1] ": a \"prints:\" block with no example before it" >> (dir "/errors")
                return
            }
            out = dir "/" last_name ".out"
            for (i = 1; i <= n; i++)
                print L[i] > out
            close(out)
            return
        }
        is_c = kind == "md"
        names = 0
        for (i = 1; i <= n; i++) {
            t = L[i]
            sub(/[ \t]*\/\/.*$/, "", t)
            names += L[i] ~ /pbl_|PBL_/
            is_c += names && t ~ /;[ \t]*$/
        }
        if (!is_c) {
            print file ":" S[1] ": " L[1] >> (dir "/skipped")
            return
        }
        count++
        name = tag "_" count
        last_name = name
        out = dir "/" name ".c"
        n_given = 0
        for (i = 1; i <= n && L[i] ~ /^\/\/ given /; i++)
            n_given++
        has_main = 0
        for (i = 1; i <= n; i++)
            if (L[i] ~ /^int main\(/)
                has_main = 1
        mode = n_given ? "compile" : "run"
        print "#include <pebble/pebble.h>" > out
        print "#include <math.h>" > out
        print "#include <stdint.h>" > out
        print "#include <stdio.h>" > out
        print "#include <stdlib.h>" > out
        print "#include <string.h>" > out
        if (mode == "run") {
            print "void doc_check(int ok, const char *what, double got, const char *op, double want, const char *where);" > out
            print "void doc_check(int ok, const char *what, double got, const char *op, double want, const char *where)" > out
            print "{" > out
            print "    printf(\"%s: %s = %.9g, want %s %.9g: %s\\n\", where, what, got, op, want, ok ? \"ok\" : \"FAILED\");" > out
            print "    if (!ok)" > out
            print "        exit(3);" > out
            print "}" > out
            print "#define DOC_EQ(a, b, where) doc_check((double)(a) == (double)(b), #a, (double)(a), \"==\", (double)(b), where)" > out
            print "#define DOC_NEAR(a, b, where) doc_check(fabs((double)(a) - (double)(b)) <= 0.01 * fmax(1.0, fabs((double)(b))), #a, (double)(a), \"~\", (double)(b), where)" > out
        }
        for (i = 1; i <= n_given; i++) {
            printf "#line %d \"%s\"\n", S[i], file > out
            print substr(L[i], 10) > out
        }
        body0 = n_given + 1
        if (!has_main) {
            while (body0 <= n && (L[body0] ~ /^#include/ || L[body0] ~ /^[ \t]*$/)) {
                if (L[body0] ~ /^#include/) {
                    printf "#line %d \"%s\"\n", S[body0], file > out
                    print L[body0] > out
                }
                body0++
            }
            print (mode == "run" ? "int main(void)" : "int doc_example(void);\nint doc_example(void)") > out
            print "{" > out
        }
        printf "#line %d \"%s\"\n", S[body0], file > out
        for (i = body0; i <= n; i++) {
            code = L[i]
            if (code ~ /^[ \t]*\.\.\.[ \t]*$/) {
                print "" > out
                continue
            }
            t = code
            sub(/^[ \t]+/, "", t)
            sub(/[ \t]+$/, "", t)
            claimish = mode == "run" && (t ~ /^\/\*.*\*\/$/ || t ~ /^\/\//)
            if (claimish) {
                if (t ~ /^\/\*/)
                    t = substr(t, 3, length(t) - 4)
                else
                    t = substr(t, 3)
                k = split(t, items, ",")
                checks = ""
                for (m = 1; m <= k && claimish; m++) {
                    it = items[m]
                    op = "DOC_EQ"
                    pos = index(it, "==")
                    if (pos == 0) {
                        op = "DOC_NEAR"
                        pos = index(it, "≈")
                    }
                    lhs = substr(it, 1, pos - 1)
                    rhs = substr(it, pos + (op == "DOC_EQ" ? 2 : length("≈")))
                    gsub(/^[ \t]+|[ \t]+$/, "", lhs)
                    gsub(/^[ \t]+|[ \t]+$/, "", rhs)
                    if (pos == 0 || lhs !~ /^[A-Za-z_][A-Za-z0-9_.>[\]-]*$/ || rhs !~ /^-?[0-9][0-9.eE+-]*$/)
                        claimish = 0
                    checks = checks op "(" lhs ", " rhs ", \"" file ":" S[i] "\"); "
                }
                if (claimish) # before the line: a // comment would swallow them
                    code = checks code
            }
            print code > out
        }
        if (!has_main) {
            print "    return 0;" > out
            print "}" > out
        }
        if (mode == "compile")
            print "int main(void) { return 0; }" > out
        close(out)
        printf "%s\t%s\t%s:%d\n", name, mode, file, S[1] >> (dir "/list")
        n = 0
    }
    BEGIN {
        count = 0; n = 0; last_name = ""; infence = 0; in_overview = kind == "h"
        tag = file
        gsub(/[^A-Za-z0-9]/, "_", tag)
    }
    kind == "h" && in_overview {
        line = $0
        if (index(line, "*/")) {
            emit_block()
            in_overview = 0
            next
        }
        if (FNR == 1)
            next
        sub(/^ \*/, "", line)
        if (line ~ /^[ \t]*$/) {
            if (n > 0) {
                L[++n] = ""
                S[n] = FNR
            }
            blank = 1
            next
        }
        sub(/^ /, "", line)
        if (line ~ /^    /) {
            if (n == 0 && !blank)
                next
            if (n == 0) {
                prints = prev ~ /prints:$/
            }
            L[++n] = substr(line, 5)
            S[n] = FNR
            next
        }
        emit_block()
        n = 0
        blank = 0
        prev = line
        next
    }
    kind == "md" {
        if (!infence && $0 ~ /^```/) {
            infence = 1
            lang = substr($0, 4)
            gsub(/[ \t]/, "", lang)
            take = lang == "c" || prev ~ /prints:$/
            prints = lang != "c"
            n = 0
            next
        }
        if (infence && $0 ~ /^```[ \t]*$/) {
            infence = 0
            if (take)
                emit_block()
            n = 0
            prev = ""
            next
        }
        if (infence) {
            if (take) {
                L[++n] = $0
                S[n] = FNR
            }
            next
        }
        if ($0 !~ /^[ \t]*$/)
            prev = $0
    }
    ' "$1"
}
for h in include/pebble/*.h; do
    extract "$h" h
done
for m in README.md docs/*.md; do
    [ -f "$m" ] && extract "$m" md
done
if [ -s "$tmp/ex/errors" ]; then
    while IFS= read -r e; do fail "$e"; done <"$tmp/ex/errors"
fi

# ---- compile, link and run them -----------------------------------------------------------

if [ -s "$tmp/ex/skipped" ]; then
    while IFS= read -r s; do echo "skipped (not C: no pbl_ name or no statement): $s"; done <"$tmp/ex/skipped"
fi
[ -s "$tmp/ex/list" ] || { fail "no examples found"; exit 1; }
libdir=$(dirname "$lib")
mkdir -p "$tmp/run"
while IFS=$'\t' read -r name mode where; do
    c=$tmp/ex/$name.c
    # a fragment shows part of a program: what it sets may be used by code not shown
    lenient=()
    [ "$mode" = compile ] && lenient=(-Wno-unused-variable -Wno-unused-but-set-variable)
    if ! "$cc" "${cflags[@]}" "${lenient[@]}" "${extra[@]}" -o "$tmp/ex/$name" "$c" "$lib" -Wl,-rpath,"$libdir" -lm \
        >"$tmp/err" 2>&1; then
        fail "$where: the example does not compile or link:"
        cat "$tmp/err"
        echo "--- as compiled ($c):"
        cat -n "$c"
        continue
    fi
    if [ "$mode" = compile ]; then
        [ -e "$tmp/ex/$name.out" ] && { fail "$where: a \"prints:\" block follows an example that does not run"; continue; }
        pass "$where: compiles and links (a fragment: not run)"
        continue
    fi
    (cd "$tmp/run" && "$tmp/ex/$name" >"$tmp/out" 2>"$tmp/err")
    rc=$?
    if [ $rc -ne 0 ]; then
        fail "$where: the example exits with status $rc"
        echo "--- stdout:"; tail -n 20 "$tmp/out"; echo "--- stderr:"; tail -n 20 "$tmp/err"
        continue
    fi
    checks=$(grep -c ': ok$' "$tmp/out")
    if [ -e "$tmp/ex/$name.out" ]; then
        if ! diff -u "$tmp/ex/$name.out" <(grep -v -E '^[^ ]+:[0-9]+: .* = .*, want (==|~) .*: ok$' "$tmp/out") >"$tmp/diff"; then
            fail "$where: the output differs from what the text says it prints (- documented, + printed):"
            cat "$tmp/diff"
            continue
        fi
        pass "$where: runs, exit 0, prints the $(wc -l <"$tmp/ex/$name.out") documented lines$([ "$checks" -gt 0 ] && echo ", $checks stated values hold")"
    else
        pass "$where: runs, exit 0$([ "$checks" -gt 0 ] && echo ", $checks stated values hold: $(grep ': ok$' "$tmp/out" | sed 's/^[^ ]* //; s/: ok$//' | paste -sd';' | sed 's/;/; /g')")"
    fi
done <"$tmp/ex/list"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
