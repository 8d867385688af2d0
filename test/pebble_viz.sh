#!/usr/bin/env bash
# `pebble viz`: the files it writes and its errors; with `browser`, the page in headless
# Chromium: it loads without a script error and draws one rectangle per record, for 5
# records, a zoo graph's plan and 5,000 records; a page of both orders (--schedule both)
# opens on either and its toggle switches program order to min_peak.
#
# usage: pebble_viz.sh PATH/TO/pebble [cli|browser]
#
# browser exits 77 (skipped) with a message when no Chromium is installed (Debian: chromium).
set -u

bin=${1:?usage: pebble_viz.sh PATH/TO/pebble [cli|browser]}
mode=${2:-cli}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pebble_viz.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/cli_harness.sh"


# MiniMalloc's five-buffer example (shared/minimalloc_benchmarks/input.12.csv)
cat >"$tmp/five.csv" <<'EOF'
id,lower,upper,size
b1,0,3,4
b2,3,9,4
b3,0,9,4
b4,9,21,4
b5,0,21,4
EOF
# 5,000 records from a fixed linear congruential sequence: lifetimes up to 64 steps over
# 3,000 steps, sizes 64 B .. 1 MiB
awk 'BEGIN {
    print "id,lower,upper,size"; s = 12345
    for (i = 0; i < 5000; i++) {
        s = (s * 1103515245 + 12345) % 2147483648; a = s % 3000
        s = (s * 1103515245 + 12345) % 2147483648; l = 1 + s % 64
        s = (s * 1103515245 + 12345) % 2147483648; z = 64 * (1 + s % 16384)
        printf "t%d,%d,%d,%d\n", i, a, a + l, z
    }
}' >"$tmp/many.csv"

if [ "$mode" = cli ]; then
    run viz "$tmp/five.csv" --html "$tmp/five.html" --svg "$tmp/five.svg"
    [ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ] || fail "viz five.csv: exit $rc"
    n=$(grep -c '<rect x=.*<title>' "$tmp/five.svg")
    [ "$n" -eq 5 ] || fail "five.svg has $n record rectangles, expected 5"
    grep -q '<title>b5: 4 bytes at offset' "$tmp/five.svg" || fail "five.svg: no title for b5"
    grep -q 'lower bound 12 B' "$tmp/five.svg" || fail "five.svg: no lower bound line (12 B)"
    pass "viz five.csv --html --svg: 5 rectangles in the SVG, lower bound 12 B"

    grep -q '"n_records": 5,' "$tmp/five.html" || fail "five.html: no embedded plan of 5 records"
    grep -q '@PEBBLE_VIZ_DATA@' "$tmp/five.html" && fail "five.html: the data marker is still there"
    # self-contained: nothing fetched from anywhere
    if grep -Eq '<(link|img|iframe)|src=|@import|url\(' "$tmp/five.html"; then
        fail "five.html refers to another file: $(grep -Eo '<(link|img|iframe)[^>]*|src=[^ >]*|@import[^;]*|url\([^)]*\)' "$tmp/five.html" | head -3)"
    fi
    pass "five.html: the plan embedded, no outside references ($(wc -c <"$tmp/five.html") bytes)"

    # --schedule both: the page holds both orders' plans (the second in pebble-data-min-peak)
    # and the toggle; mlp_train's min_peak order is 64 bytes lower (the loss computed later)
    run viz zoo:mlp_train --html "$tmp/both.html" --schedule both
    [ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ] || fail "viz zoo:mlp_train --schedule both: exit $rc"
    grep -q '<span id="orders" hidden>order:' "$tmp/both.html" || fail "both.html: no order toggle"
    grep -q '@PEBBLE_VIZ_MIN_PEAK@' "$tmp/both.html" && fail "both.html: the min_peak marker is still there"
    if command -v python3 >/dev/null 2>&1; then
        python3 - "$tmp/both.html" <<'PY' || fail "both.html: not the two orders' plans (above)"
import json, re, sys
page = open(sys.argv[1]).read()
def data(el):
    m = re.search(r'<script id="%s" type="application/json">(.*?)</script>' % el, page, re.S)
    return json.loads(m.group(1))
p, m = data("pebble-data"), data("pebble-data-min-peak")
assert (p["lower_bound"], m["lower_bound"]) == (939072, 939008), (p["lower_bound"], m["lower_bound"])
assert (p["explain"]["peak_step"], m["explain"]["peak_step"]) == (20, 21)
assert p["graph"]["schedule"] != m["graph"]["schedule"]
PY
    fi
    run viz zoo:mlp_train --html "$tmp/one.html"
    grep -q '<script id="pebble-data-min-peak" type="application/json"></script>' "$tmp/one.html" \
        || fail "one.html: a page of one order holds a second plan"
    pass "viz --schedule both: both orders' plans (939072 and 939008 bytes, peaks at steps 20 and 21) and the toggle; $(wc -c <"$tmp/both.html") bytes against $(wc -c <"$tmp/one.html") for one order"

    # records too long for explain's per-step arrays: the page still comes, without the peak
    printf 'id,lower,upper,size\na,0,100000000,4\nb,5,9,8\n' >"$tmp/long.csv"
    run viz "$tmp/long.csv" --html "$tmp/long.html"
    [ "$rc" -eq 0 ] && grep -q 'the page marks no peak' "$tmp/err" || fail "viz long.csv: exit $rc, or no word on the missing peak"
    grep -q '"explain"' "$tmp/long.html" && fail "long.html: an explanation of 10^8 steps"
    pass "viz of records over 2^26 steps: the page without explain's lists, and a message saying so"

    run viz "$tmp/five.csv" --svg "$tmp/naive.svg" --strategy naive
    grep -q 'five.csv — naive' "$tmp/naive.svg" && grep -q 'arena 20 B' "$tmp/naive.svg" \
        || fail "--strategy naive: the SVG does not show naive's 20-byte arena"
    pass "viz --svg --strategy naive: arena 20 B"

    run viz zoo:mlp_train --html "$tmp/mlp.html" --svg "$tmp/mlp.svg"
    if [ "$rc" -eq 0 ]; then
        grep -q '"schedule": \[' "$tmp/mlp.html" || fail "mlp.html: no graph labels"
        n=$(grep -c '<rect x=.*<title>' "$tmp/mlp.svg")
        [ "$n" -eq 14 ] || fail "mlp.svg has $n record rectangles, expected 14 (zoo:mlp_train's records)"
        pass "viz zoo:mlp_train: graph labels in the page, 14 rectangles in the SVG"
        # the page lists each step's live values from pbl_explain: its peak list is explain's
        grep -q '"explain": {"strategy": "[a-z_]*", "arena": 939072, "lower_bound": 939072, "peak_step": 20,' "$tmp/mlp.html" \
            || fail "mlp.html: no explanation (peak step 20, 939,072 bytes) embedded"
        run explain zoo:mlp_train --format csv
        names=$(cut -d, -f1 "$tmp/out" | tail -n +2 | tr '\n' ' ')
        idx=$(grep -o '"live_at_peak": \[[0-9,]*\]' "$tmp/mlp.html" | grep -o '[0-9][0-9,]*')
        ids=$(grep -o '"records": {"id": \[[^]]*\]' "$tmp/mlp.html" | sed 's/.*\[//; s/\]//; s/"//g')
        listed=""
        for i in ${idx//,/ }; do listed+="$(echo "$ids" | cut -d, -f$((i + 1))) "; done
        [ "$listed" = "$names" ] || fail "mlp.html lists '$listed' at the peak, pebble explain '$names'"
        grep -q '"steps": {"start": \[' "$tmp/mlp.html" || fail "mlp.html: no per-step live lists"
        pass "mlp.html: the peak (step 20) and its live list, the same as pebble explain's ($names)"
        # the same graph through a JSON graph file: the same picture
        run export zoo:mlp_train --json "$tmp/mlp_train.json"
        [ "$rc" -eq 0 ] || fail "export zoo:mlp_train --json: exit $rc"
        run viz "$tmp/mlp_train.json" --svg "$tmp/mlp_json.svg"
        [ "$rc" -eq 0 ] || fail "viz mlp_train.json: exit $rc"
        grep '<rect x=.*<title>' "$tmp/mlp_json.svg" >"$tmp/a" && grep '<rect x=.*<title>' "$tmp/mlp.svg" >"$tmp/b" \
            && diff -q "$tmp/a" "$tmp/b" >/dev/null || fail "the JSON graph file's rectangles differ from zoo:mlp_train's"
        pass "viz of the exported JSON graph file: the same 14 rectangles, names and offsets"
        # --dot: one box per scheduled node; waits (dashed red) only with several streams
        run viz zoo:mlp_train --dot "$tmp/mlp1.dot"
        [ "$rc" -eq 0 ] || fail "viz zoo:mlp_train --dot: exit $rc"
        run viz zoo:mlp_train --dot "$tmp/mlp2.dot" --streams 2 --stream-strategy hb_events
        [ "$rc" -eq 0 ] || fail "viz zoo:mlp_train --dot --streams 2: exit $rc"
        b1=$(grep -c 'shape=box' "$tmp/mlp1.dot"); b2=$(grep -c 'shape=box' "$tmp/mlp2.dot")
        w1=$(grep -c 'style=dashed' "$tmp/mlp1.dot"); w2=$(grep -c 'style=dashed' "$tmp/mlp2.dot")
        [ "$b1" -gt 0 ] && [ "$b1" -eq "$b2" ] && [ "$w1" -eq 0 ] && [ "$w2" -gt 0 ] \
            || fail "--dot: $b1 and $b2 nodes, $w1 and $w2 waits (expected equal nodes, waits only on 2 streams)"
        grep -q 'stream 1"' "$tmp/mlp2.dot" || fail "--dot --streams 2: no node on stream 1"
        if command -v dot >/dev/null 2>&1; then
            dot -Tsvg "$tmp/mlp2.dot" -o "$tmp/mlp2.svg" || fail "dot -Tsvg does not parse the --dot output"
        fi
        pass "viz zoo:mlp_train --dot: $b1 nodes; --streams 2: $w2 waits drawn dashed"
    elif grep -q 'not part of this build' "$tmp/err"; then
        echo "skip - zoo graphs are not part of this build"
    else
        fail "viz zoo:mlp_train: exit $rc"
    fi

    # an ONNX model (Debian's libonnx-testdata): Reshape, Transpose, Reshape give 2 records
    onnx=/usr/share/libonnx-testdata/data/pytorch-converted/test_PixelShuffle/model.onnx
    if [ -f "$onnx" ] && "$bin" plan "$onnx" >/dev/null 2>&1; then
        run viz "$onnx" --svg "$tmp/onnx.svg"
        n=$(grep -c '<rect x=.*<title>' "$tmp/onnx.svg")
        [ "$rc" -eq 0 ] && [ "$n" -eq "$("$bin" plan "$onnx" | sed -n 's/.*(\([0-9]*\) records.*/\1/p')" ] \
            || fail "viz $onnx: exit $rc, $n rectangles, not pebble plan's record count"
        pass "viz of an ONNX model: $n rectangles, one per record pebble plan counts"
    else
        echo "skip - no ONNX model (libonnx-testdata) or no ONNX support in this build"
    fi

    # errors: one line, the right exit status, and no file left behind
    for args in "viz|no FILE given" "viz $tmp/five.csv|nothing to write" \
                "viz $tmp/five.csv --svg $tmp/x.svg --strategy nope|--strategy: unknown strategy 'nope'" \
                "viz $tmp/five.csv --html|--html" "viz $tmp/five.csv --html=|--html: empty file name" \
                "viz $tmp/five.csv --dot $tmp/x.dot|is not a graph" \
                "viz $tmp/five.csv --html $tmp/x.html --strategy naive|--strategy chooses what --svg draws" \
                "viz $tmp/five.csv --svg $tmp/x.svg --streams 2|--streams and --stream-strategy apply to --dot" \
                "viz $tmp/five.csv --svg $tmp/x.svg --batch 2|.*five.csv: --batch applies to zoo graphs only" \
                "viz zoo:mlp --svg $tmp/x.svg --schedule both|--schedule both applies to --html only" \
                "viz zoo:mlp --html $tmp/x.html --schedule nah|unknown schedule 'nah' (one of: program, min_peak, both)"; do
        run ${args%%|*}
        [ "$rc" -eq 2 ] || fail "pebble ${args%%|*}: exit $rc, expected 2"
        grep -q -- "^pebble: .*${args#*|}" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ] \
            || fail "pebble ${args%%|*}: stderr is not one line naming '${args#*|}'"
        pass "pebble ${args%%|*}: exit 2, $(cat "$tmp/err")"
    done
    printf 'id,lower,upper,size\nx,5,2,8\n' >"$tmp/bad.csv"
    run viz "$tmp/bad.csv" --html "$tmp/bad.html"
    [ "$rc" -eq 2 ] && [ ! -e "$tmp/bad.html" ] || fail "viz bad.csv: exit $rc (expected 2) or a file written"
    pass "viz of a malformed CSV: exit 2, $(cat "$tmp/err")"
    run viz "$tmp/five.csv" --html "$tmp/no/such/dir/x.html"
    [ "$rc" -eq 1 ] || fail "viz --html into a missing directory: exit $rc, expected 1"
    pass "viz --html into a missing directory: exit 1, $(cat "$tmp/err")"
    # outputs that name the input or each other are refused before anything is written
    # (--html FILE used to overwrite a JSON graph file with the page)
    cp "$tmp/five.csv" "$tmp/five.keep"
    run viz "$tmp/five.csv" --html "$tmp/five.csv"
    [ "$rc" -eq 2 ] && grep -q "^pebble: --html .*five.csv: that is the input FILE" "$tmp/err" \
        && cmp -s "$tmp/five.csv" "$tmp/five.keep" || fail "viz --html FILE (the input): exit $rc, or FILE changed"
    pass "viz --html naming the input: exit 2, $(cat "$tmp/err")"
    run viz "$tmp/five.csv" --html "$tmp/same.html" --svg "$tmp/../$(basename "$tmp")/same.html"
    [ "$rc" -eq 2 ] && grep -q "^pebble: --svg .*: the same file as --html" "$tmp/err" && [ ! -e "$tmp/same.html" ] \
        || fail "viz --html X --svg X: exit $rc, or a file written"
    pass "viz --html X --svg X (another name): exit 2, $(cat "$tmp/err")"
    # a link as OUT: its target is written, the link stays (it used to be replaced)
    mkdir "$tmp/real" && echo old >"$tmp/real/p.svg" && ln -s real/p.svg "$tmp/link.svg"
    run viz "$tmp/five.csv" --svg "$tmp/link.svg"
    [ "$rc" -eq 0 ] && [ -L "$tmp/link.svg" ] && grep -q '<svg' "$tmp/real/p.svg" \
        || fail "viz --svg LINK: exit $rc, the link replaced or its target not written"
    pass "viz --svg LINK writes the link's target"
    if mkfifo "$tmp/fifo" 2>/dev/null; then
        timeout 60 cat "$tmp/fifo" >"$tmp/from_fifo" &
        reader=$!
        run viz "$tmp/five.csv" --svg "$tmp/fifo"
        wait "$reader"
        [ "$rc" -eq 0 ] && [ -p "$tmp/fifo" ] && grep -q '<svg' "$tmp/from_fifo" \
            || fail "viz --svg FIFO: exit $rc, the FIFO replaced or the reader got no SVG"
        pass "viz --svg FIFO: the reader gets the SVG"
    fi
    ls "$tmp" | grep -q '\.tmp\.' && fail "a temporary file was left behind: $(ls "$tmp" | grep '\.tmp\.')"
    pass "no temporary files left"
    echo "$passed passed"
    exit 0
fi

# ---- browser -------------------------------------------------------------------------------
chromium=""
for c in chromium chromium-browser google-chrome; do
    command -v "$c" >/dev/null 2>&1 && { chromium=$(command -v "$c"); break; }
done
if [ -z "$chromium" ]; then
    echo "skip: no chromium installed (Debian: apt-get install chromium); the page is not tested in a browser"
    exit 77
fi

# load PAGE [FRAGMENT]: the DOM after the page's script ran (into $tmp/dom), Chromium's log with
# the page's console messages (into $tmp/log). --no-sandbox: CI containers run as root.
load() {
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
        --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0 \
        --dump-dom "file://$1${2:+#$2}" >"$tmp/dom" 2>"$tmp/log"
    local status=$?
    [ "$status" -eq 0 ] || { cp "$tmp/log" "$tmp/err"; fail "chromium exited $status on $1"; }
}

# expect_page PAGE FRAGMENT RECTS STRATEGY: loaded without errors, drew RECTS rectangles of STRATEGY
expect_page() {
    load "$1" "$2"
    local body
    body=$(grep -o '<body[^>]*>' "$tmp/dom" | head -1)
    if grep -Eq 'Uncaught|INFO:CONSOLE.*[Ee]rror' "$tmp/log"; then
        cp "$tmp/log" "$tmp/err"
        fail "$1: a script error in the console: $(grep -E 'Uncaught|CONSOLE.*[Ee]rror' "$tmp/log" | head -2)"
    fi
    case $body in *data-errors=*) fail "$1: the page counted script errors: $body" ;; esac
    case $body in *'data-ready="1"'*) ;; *) fail "$1: the script did not finish: $body" ;; esac
    case $body in *"data-rects=\"$3\""*) ;; *) fail "$1: expected data-rects=\"$3\": $body" ;; esac
    case $body in *"data-strategy=\"$4\""*) ;; *) fail "$1: expected data-strategy=\"$4\": $body" ;; esac
    grep -q "pebble-viz: drew $3 rectangles ($4) in" "$tmp/log" || fail "$1: no console line 'drew $3 rectangles ($4)'"
    draw_ms=$(echo "$body" | grep -o 'data-draw-ms="[0-9.]*"' | cut -d'"' -f2)
}

run viz "$tmp/five.csv" --html "$tmp/five.html"
# the page shows the best strategy first: the embedded "best" index into the strategies' names
best=$(grep -o '"best": [0-9]*' "$tmp/five.html" | grep -o '[0-9]*$')
best_name=$(grep -o '^{"name": "[a-z_]*"' "$tmp/five.html" | sed -n "$((best + 1))p" | cut -d'"' -f4)
[ -n "$best_name" ] || fail "five.html: no best strategy in the embedded plan"
expect_page "$tmp/five.html" "" 5 "$best_name"
pass "five.html in $(basename "$chromium"): no errors, 5 rectangles ($best_name, the best)"
expect_page "$tmp/five.html" "strategy=naive" 5 naive
pass "five.html#strategy=naive: 5 rectangles of naive"

run viz zoo:mlp_train --html "$tmp/mlp.html"
if [ "$rc" -eq 0 ]; then
    expect_page "$tmp/mlp.html" "strategy=greedy_by_size&scale=all" 14 greedy_by_size
    pass "zoo:mlp_train: 14 rectangles (greedy_by_size, one scale for all)"
    # at first the peak's live values are listed: pebble explain's four, largest first
    body=$(grep -o '<body[^>]*>' "$tmp/dom" | head -1)
    case $body in *'data-listed-step="20" data-listed="4"'*) ;; *) fail "mlp.html: the peak's list (step 20, 4 values) is not shown: $body" ;; esac
    rows=$(grep -o '<tr data-record="[0-9]*"><td class="num">[0-9,]*</td><td>[a-z_]*</td><td>[^<]*</td>' "$tmp/dom" \
           | sed 's/.*<td>\([a-z_]*\)<\/td><td>\([^<]*\)<\/td>$/\2:\1/' | tr '\n' ' ')
    [ "$rows" = "fc1/grad_w:parameter_gradient fc2/grad_x:gradient fc3:output loss:output " ] \
        || fail "mlp.html: the peak's rows are '$rows'"
    pass "mlp.html: the peak marked and its 4 live values listed with their kinds ($rows)"
    # #step=N lists another step, as a click on it does
    expect_page "$tmp/mlp.html" "strategy=naive&step=5" 14 naive
    body=$(grep -o '<body[^>]*>' "$tmp/dom" | head -1)
    case $body in *'data-listed-step="5"'*) ;; *) fail "mlp.html#step=5: step 5 not listed: $body" ;; esac
    grep -q '<p id="stephead">step 5: ' "$tmp/dom" || fail "mlp.html#step=5: no heading for step 5"
    pass "mlp.html#step=5: step 5's live values listed"
    # a hover asked for in the URL survives the list below the plot (no redraw hides it)
    best=$(grep -o '"best": [0-9]*' "$tmp/mlp.html" | grep -o '[0-9]*$')
    mlp_best=$(grep -o '^{"name": "[a-z_]*"' "$tmp/mlp.html" | sed -n "$((best + 1))p" | cut -d'"' -f4)
    expect_page "$tmp/mlp.html" "hover=fc2/grad_x" 14 "$mlp_best"
    grep -o '<div id="tip"[^>]*>' "$tmp/dom" | grep -vq hidden && grep -q '<b>fc2/grad_x</b>' "$tmp/dom" || fail "mlp.html#hover=fc2/grad_x: no tooltip shown"
    pass "mlp.html#hover=fc2/grad_x: the tooltip shows, with the peak listed below"
fi

# both orders: the page opens on program order, #schedule=min_peak on the other; clicking
# the toggle's min_peak button draws that order (its peak, step 21, and its 3 values listed)
run viz zoo:mlp_train --html "$tmp/both.html" --schedule both
if [ "$rc" -eq 0 ]; then
    best=$(grep -o '"best": [0-9]*' "$tmp/both.html" | head -1 | grep -o '[0-9]*$')
    both_best=$(grep -o '^{"name": "[a-z_]*"' "$tmp/both.html" | sed -n "$((best + 1))p" | cut -d'"' -f4)
    expect_page "$tmp/both.html" "" 14 "$both_best"
    body=$(grep -o '<body[^>]*>' "$tmp/dom" | head -1)
    case $body in *'data-listed-step="20" data-listed="4" data-schedule="program" data-lower-bound="939072"'*) ;;
        *) fail "both.html: not program order's peak (step 20, 4 values, 939072 bytes): $body" ;; esac
    grep -q '<span id="orders">order:' "$tmp/dom" || fail "both.html: the order toggle is hidden"
    expect_page "$tmp/both.html" "schedule=min_peak" 14 "$both_best"
    body=$(grep -o '<body[^>]*>' "$tmp/dom" | head -1)
    case $body in *'data-listed-step="21" data-listed="3" data-schedule="min_peak" data-lower-bound="939008"'*) ;;
        *) fail "both.html#schedule=min_peak: not min_peak's peak (step 21, 3 values, 939008 bytes): $body" ;; esac
    # the click: a copy of the page that clicks min_peak once loaded in program order
    sed 's#</body>#<script>if (!location.hash.includes("schedule=min_peak")) document.querySelector(\x27input[value="min_peak"]\x27).click();</script></body>#' \
        "$tmp/both.html" >"$tmp/click.html"
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
        --user-data-dir="$tmp/profile" --virtual-time-budget=5000 --dump-dom "file://$tmp/click.html" >"$tmp/dom" 2>"$tmp/log" \
        || fail "chromium on click.html: exit $?"
    body=$(grep -o '<body[^>]*>' "$tmp/dom" | head -1)
    case $body in *'data-listed-step="21" data-listed="3" data-schedule="min_peak" data-lower-bound="939008"'*) ;;
        *) fail "both.html: a click on min_peak did not draw min_peak's order: $body" ;; esac
    case $body in *data-errors=*) fail "click.html: the page counted script errors: $body" ;; esac
    pass "both.html: program order's peak (step 20) first; #schedule=min_peak and a click on the toggle show min_peak's (step 21, 939008 bytes)"
else
    fail "viz zoo:mlp_train --schedule both: exit $rc"
fi

start=$(date +%s%N)
run viz "$tmp/many.csv" --html "$tmp/many.html"
[ "$rc" -eq 0 ] || fail "viz many.csv: exit $rc"
mid=$(date +%s%N)
expect_page "$tmp/many.html" "strategy=offset_greedy_by_size" 5000 offset_greedy_by_size
end=$(date +%s%N)
pass "5,000 records: 5000 rectangles (offset_greedy_by_size) drawn in $draw_ms ms; pebble viz $(((mid - start) / 1000000)) ms, page $(wc -c <"$tmp/many.html") bytes loaded and drawn in $(((end - mid) / 1000000)) ms (Chromium's start included)"
echo "$passed passed"
