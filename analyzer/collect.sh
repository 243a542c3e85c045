#!/bin/sh
# kafka-forensics collect: run on each Kafka broker (or KRaft controller) host, as the user that
# runs Kafka or root. Needs only a POSIX shell, find, ln, cp, tar, gzip and sha256sum (or shasum).
#
#   sh kafka-forensics-collect.sh [-l KAFKA_LOGS_DIR] [-o OUT_DIR] [-q] [--topic GLOB]... [--partition N]...
#                                 [--since TIME] [--no-consumer-offsets] SERVER_PROPERTIES
#
# Reads log.dirs (else log.dir, else Kafka's default /tmp/kafka-logs) and metadata.log.dir from
# SERVER_PROPERTIES, and archives into OUT_DIR (default: the current directory):
#   OUT_DIR/kafka-forensics-<host>-node<id>-<UTC time>.tar.gz          every log dir (whole, or
#       focused: see below); Kafka's server.log*, controller.log*, state-change.log*,
#       kafkaServer.out* (from -l, else $LOG_DIR, else logs/ beside the properties' folder, else
#       the -Dkafka.logs.dir of the broker running with these properties); the properties with
#       every secret redacted; COLLECT.txt (what was taken, how, what was left out and why)
#   OUT_DIR/kafka-forensics-<host>-node<id>-<UTC time>.tar.gz.sha256   SHA-256 of the archive and
#       of every file in it: after `tar -xzf`, `sha256sum -c` beside them checks everything (its
#       closing '#' lines, which sha256sum -c and shasum -c skip, say what was left out).
# Focus (the same as analyze's): --topic GLOB (repeatable) and --partition N (repeatable) take only
# those partitions; --since TIME leaves out the segments whose newest batch is older than TIME, as
# Kafka's time retention would (the active segment is always kept). TIME: 2024-05-01T12:00:00Z
# (UTC; seconds and Z optional), 2024-05-01, epoch milliseconds, or 90m / 6h / 2d before now.
# Whatever the focus, every log dir's checkpoints, meta.properties and .kafka_cleanshutdown are
# taken, every file of a kept partition but its left-out segments (partition.metadata,
# leader-epoch-checkpoint, producer snapshots...), and the internal topics whole:
# __cluster_metadata, __transaction_state, __remote_log_metadata, every other __ topic and
# __consumer_offsets (unless --no-consumer-offsets).
# Nothing is written into the log dirs. Each file is first hard-linked (a segment Kafka never
# rewrites: every one but the newest of its partition) or copied (everything else) into a staging
# folder in OUT_DIR, so a live broker deleting or rewriting files cannot tear the archive; put
# OUT_DIR on the log dirs' filesystem for links (otherwise everything is copied). Hashes are taken
# from the staged files, which nothing else writes. Exit 0 done, 2 unusable input or failure.
set -eu
umask 077

ME=kafka-forensics-collect
REDACTED="[REDACTED by kafka-forensics collect]"
die() { echo "$ME: $*" >&2; exit 2; }
say() { [ -n "$QUIET" ] || echo "$ME: $*" >&2; }
usage() { die "usage: $0 [-l KAFKA_LOGS_DIR] [-o OUT_DIR] [-q] [--topic GLOB]... [--partition N]... [--since TIME] [--no-consumer-offsets] SERVER_PROPERTIES"; }
NL='
'

LOGS=""
OUT=.
QUIET=""
TOPICS=""       # the --topic globs, one a line
PARTS=" "       # the --partition numbers, space-separated
SINCE=""        # --since as given
NO_OFFSETS=""   # --no-consumer-offsets
# (options written in by `kafka-forensics collect --topic ... --out FILE` come here, before the command line's)
while [ $# -gt 0 ]; do
    case $1 in
        --*=*) opt=${1%%=*}; val=${1#*=}; shift; set -- "$opt" "$val" "$@" ;;
        -l | --logs | -o | --out | --topic | --partition | --since)
            [ $# -ge 2 ] || usage
            case $1 in
                -l | --logs) LOGS=$2 ;;
                -o | --out) OUT=$2 ;;
                --topic) [ -n "$2" ] || die "--topic: an empty glob"; TOPICS="$TOPICS$2$NL" ;;
                --partition)
                    case $2 in '' | *[!0-9]*) die "--partition $2: not a partition number" ;; esac
                    n=$(printf '%s' "$2" | sed 's/^0*//'); PARTS="$PARTS${n:-0} " ;;
                --since) SINCE=$2 ;;
            esac
            shift 2 ;;
        -q | --quiet) QUIET=1; shift ;;
        --no-consumer-offsets) NO_OFFSETS=1; shift ;;
        --) shift; break ;;
        -*) usage ;;
        *) break ;;
    esac
done
[ $# -eq 1 ] || usage
PROPS=$1
[ -f "$PROPS" ] && [ -r "$PROPS" ] || die "$PROPS: not a readable file"
[ -d "$OUT" ] && [ -w "$OUT" ] || die "$OUT: not a writable directory (-o)"

if command -v sha256sum >/dev/null 2>&1; then SHA="sha256sum"
elif command -v shasum >/dev/null 2>&1; then SHA="shasum -a 256"
else die "neither sha256sum nor shasum found"
fi

# Milliseconds since the epoch <-> UTC civil time (days_from_civil and civil_from_days, H. Hinnant),
# in awk: POSIX date can neither read a time nor print epoch seconds. (%.0f: some awks print a
# %d above 2^31 wrong.)
CIVIL='
function days(y, m, d,   era, yoe, doy) {
    y -= (m <= 2); era = int((y >= 0 ? y : y - 399) / 400); yoe = y - era * 400
    doy = int((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1
    return era * 146097 + yoe * 365 + int(yoe / 4) - int(yoe / 100) + doy - 719468
}
function iso(ms,   s, z, era, doe, yoe, y, doy, mp, d, m) {
    s = ms % 86400000; z = (ms - s) / 86400000 + 719468; era = int(z / 146097); doe = z - era * 146097
    yoe = int((doe - int(doe / 1460) + int(doe / 36524) - int(doe / 146096)) / 365)
    doy = doe - (365 * yoe + int(yoe / 4) - int(yoe / 100)); mp = int((5 * doy + 2) / 153)
    d = doy - int((153 * mp + 2) / 5) + 1; m = mp + (mp < 10 ? 3 : -9); y = yoe + era * 400 + (m <= 2)
    return sprintf("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", y, m, d, int(s / 3600000), int(s % 3600000 / 60000),
                   int(s % 60000 / 1000), s % 1000)
}'

# --since TIME in epoch milliseconds (nothing when TIME is none of the forms the usage names).
since_ms() {
    printf '%s\n' "$1" | awk -v now="$(date -u +%Y%m%d%H%M%S)" "$CIVIL"'
    function at(y, mo, d, h, mi, s) { return ((days(y, mo, d) * 24 + h) * 60 + mi) * 60 + s }
    NR > 1 { exit }
    /^[0-9]+$/ && length($0) >= 12 { printf "%.0f\n", $0 + 0; exit }
    /^[0-9]+[smhd]$/ {
        u = substr($0, length($0)); n = substr($0, 1, length($0) - 1) + 0
        f = u == "s" ? 1 : u == "m" ? 60 : u == "h" ? 3600 : 86400
        printf "%.0f\n", (at(substr(now, 1, 4) + 0, substr(now, 5, 2) + 0, substr(now, 7, 2) + 0, substr(now, 9, 2) + 0,
                             substr(now, 11, 2) + 0, substr(now, 13, 2) + 0) - n * f) * 1000
        exit
    }
    /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]([T ][0-9][0-9]:[0-9][0-9](:[0-9][0-9](\.[0-9]+)?)?)?Z?$/ {
        t = $0; sub(/Z$/, "", t)
        y = substr(t, 1, 4) + 0; mo = substr(t, 6, 2) + 0; d = substr(t, 9, 2) + 0
        h = length(t) >= 16 ? substr(t, 12, 2) + 0 : 0; mi = length(t) >= 16 ? substr(t, 15, 2) + 0 : 0
        s = length(t) >= 19 ? substr(t, 18, 2) + 0 : 0; frac = length(t) >= 21 ? substr(substr(t, 21) "000", 1, 3) + 0 : 0
        if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 59 || y < 1970) exit
        printf "%.0f\n", at(y, mo, d, h, mi, s) * 1000 + frac
    }'
}

SINCE_MS=""
if [ -n "$SINCE" ]; then
    SINCE_MS=$(since_ms "$SINCE")
    [ -n "$SINCE_MS" ] || die "--since $SINCE: not a time (2024-05-01T12:00:00Z in UTC, 2024-05-01, epoch milliseconds, or 90m, 6h, 2d before now)"
    SINCE_ISO=$(echo "$SINCE_MS" | awk "$CIVIL"'{ print iso($1 + 0) }')
fi
# The focus in COLLECT.txt and the manifest: the options themselves, each value quoted for sh
# (analyze reads this line back).
quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
FOCUS=""
OLDIFS=$IFS
IFS=$NL
for g in $TOPICS; do FOCUS="$FOCUS --topic $(quote "$g")"; done
IFS=$OLDIFS
for n in $PARTS; do FOCUS="$FOCUS --partition $n"; done
[ -z "$SINCE" ] || FOCUS="$FOCUS --since $SINCE_ISO"
[ -z "$NO_OFFSETS" ] || FOCUS="$FOCUS --no-consumer-offsets"

# The value of key $1 in SERVER_PROPERTIES: its last definition, as java.util.Properties keeps
# (key=value, key: value or key value; a value continued over lines with \ is not followed).
prop() {
    key=$(printf '%s' "$1" | sed 's/\./\\./g')
    tr -d '\r' < "$PROPS" | sed -n -e "s/^[[:space:]]*$key[[:space:]]*[=:][[:space:]]*//p" \
        -e "s/^[[:space:]]*$key[[:space:]][[:space:]]*//p" | tail -n 1 | sed 's/[[:space:]]*$//'
}

# An existing directory's absolute, symlink-free path (empty if it is not one).
absdir() { (cd "$1" 2>/dev/null && pwd -P) || true; }

# The properties with the value of every key that may hold a secret replaced (passwords, secrets,
# JAAS configs, keystore/truststore contents, tokens, credentials), continuation lines included;
# a comment line naming such a key is replaced too.
redact() {
    tr -d '\r' < "$1" | awk -v red="$REDACTED" '
        function continued(s) { match(s, /\\+$/); return RLENGTH > 0 && RLENGTH % 2 == 1 }
        function secret(k) { k = tolower(k); return k ~ /password|secret|jaas|keystore|truststore|credential|token|\.key$/ }
        cont { cont = continued($0); if (!hide) print; next }
        /^[ \t]*[#!]/ { if (secret($0)) print "# " red; else print; next }
        {
            k = $0; sub(/^[ \t]+/, "", k); sub(/[ \t]*[=: \t].*$/, "", k)
            hide = (k != "" && secret(k)); cont = continued($0)
            if (hide) print k "=" red; else print
        }'
}

# What the focus does with a log dir's sub-folder $1 (a name). Sets T and P (its topic and
# partition, split as Kafka's LocalLog.parseTopicPartitionName does: a -delete, -future or -stray
# name loses everything from its last '.', the rest splits at its last '-') and WHAT: "" (taken
# whole: internal topics, and what is no partition), "since" (taken, but --since may leave out
# its old segments) or "out: why" (left out).
focus_of() {
    n=$1 T="" P="" WHAT=""
    case $n in
        *-delete | *-future | *-stray) case $n in *.*) n=${n%.*} ;; *) return 0 ;; esac ;;
    esac
    case $n in *?-*) ;; *) return 0 ;; esac
    P=${n##*-} T=${n%-*}
    P=${P#+}
    case $P in '' | *[!0-9]*) T="" P=""; return 0 ;; esac
    case $T in
        __consumer_offsets) [ -z "$NO_OFFSETS" ] || WHAT="out: --no-consumer-offsets"; return 0 ;;
        __*) return 0 ;;  # __cluster_metadata, __transaction_state, __remote_log_metadata...: the context of every partition
    esac
    if [ -n "$TOPICS" ]; then
        hit="" old=$IFS
        IFS=$NL
        set -f
        for g in $TOPICS; do
            # shellcheck disable=SC2254
            case $T in $g) hit=1 ;; esac
        done
        set +f
        IFS=$old
        [ -n "$hit" ] || { WHAT="out: topic not in --topic"; return 0; }
    fi
    if [ "$PARTS" != " " ]; then
        n=$(printf '%s' "$P" | sed 's/^0*//')
        case $PARTS in *" ${n:-0} "*) ;; *) WHAT="out: partition not in --partition"; return 0 ;; esac
    fi
    [ -z "$SINCE" ] || WHAT=since
}

# The high watermark log dir $1 checkpointed for T-P (replication-offset-checkpoint: version, count,
# then "topic partition offset" lines), or nothing.
hw_of() {
    [ -f "$1/replication-offset-checkpoint" ] || return 0
    tr -d '\r' < "$1/replication-offset-checkpoint" | awk -v t="$T" -v p="$P" \
        'NR == 2 { n = $1 + 0 } NR > 2 && NR <= n + 2 && $1 == t && $2 + 0 == p + 0 { hw = $3 } END { if (hw != "") print hw }'
}

# The newest timestamp of segment $1 (a path without .log) as Kafka's LogSegment.largestTimestamp
# has it: its time index's last entry (TimeIndex.lastEntry, the last whole 12-byte slot: timestamp
# int64, relative offset int32) when >= 0; else -1, and Kafka takes the .log's mtime. An all-zero
# slot counts as no entry: a preallocated index an unclean stop left, which Kafka rebuilds.
newest_ts() {
    size=0
    [ ! -f "$1.timeindex" ] || size=$(wc -c < "$1.timeindex" | tr -d ' ')
    if [ "$size" -lt 12 ]; then echo -1; return 0; fi
    tail -c $((size % 12 + 12)) "$1.timeindex" | od -A n -t u1 -N 12 | awk '
        { for (i = 1; i <= NF; i++) b[n++] = $i }
        END {
            z = 1; for (i = 0; i < 12; i++) if (b[i] != 0) z = 0
            if (n < 12 || z || b[0] >= 128) { print -1; exit }
            for (i = 0; i < 8; i++) v = v * 256 + b[i]
            if (v > 9e15) v = 9e15  # (past the year 287,000: kept small enough for test -lt)
            printf "%.0f\n", v
        }'
}

# The segments of partition folder $1 that --since leaves out, one base name a line, oldest first:
# Kafka's deleteRetentionMsBreachedSegments run at SINCE. As UnifiedLog.deletableSegments, it
# walks from the oldest segment and stops at the first one kept, so only a prefix goes (never a
# hole); never the active segment; never one holding offsets at or above the high watermark $2
# (its upper bound is the next segment's base offset), so the log start never passes the HW;
# nothing without a checkpointed HW. Older: the newest timestamp below SINCE, or with no time
# index entry, the .log last modified before it (a reference file touched at SINCE).
since_cut() {
    [ -n "$2" ] || return 0
    ls "$1" | grep '^[0-9][0-9]*\.log$' | sort | awk -v hw="$2" '
        NR > 1 { if (hw + 0 >= $0 + 0) print prev; else exit }
        { prev = $0; sub(/\.log$/, "", prev) }' | while IFS= read -r base; do
        ts=$(newest_ts "$1/$base")
        if [ "$ts" -ge 0 ]; then
            [ "$ts" -lt "$SINCE_MS" ] || break
            echo "$base $ts"
        else
            [ -z "$(find "$1/$base.log" -newer "$REF" 2>/dev/null)" ] || break
            echo "$base -1"
        fi
    done
}

# Files and bytes of the files named (those that exist): "FILES BYTES".
sizes() { ls -ln "$@" 2>/dev/null | awk '/^-/ { n++; s += $5 } END { printf "%d %.0f\n", n, s }'; }

# Note in COLLECT.txt what is left out: $1 its path in the archive, $2 partition|segment, $3 "FILES BYTES", $4 why.
left_out() {
    echo "left out: $1 ($2, ${3%% *} files, ${3#* } bytes): $4" >> "$NOTES"
    echo "$2 $3" >> "$STAGING/left-out"
}

NODE=$(prop node.id)
[ -n "$NODE" ] || NODE=$(prop broker.id)
[ -n "$NODE" ] || NODE=unknown
HOST=$(uname -n)
NAME="kafka-forensics-$HOST-node$NODE-$(date -u +%Y%m%dT%H%M%SZ)"
OUT=$(absdir "$OUT")
ARCHIVE="$OUT/$NAME.tar.gz"
[ ! -e "$ARCHIVE" ] || die "$ARCHIVE already exists"

DIRS=$(prop log.dirs)
[ -n "$DIRS" ] || DIRS=$(prop log.dir)
[ -n "$DIRS" ] || DIRS=/tmp/kafka-logs
META=$(prop metadata.log.dir)
[ -z "$META" ] || DIRS="$DIRS,$META"

if [ -z "$LOGS" ]; then
    LOGS=${LOG_DIR:-}
    [ -n "$LOGS" ] || [ ! -d "$(dirname "$PROPS")/../logs" ] || LOGS="$(dirname "$PROPS")/../logs"
    # the -Dkafka.logs.dir of the broker running with these properties (named as given, else by file name)
    for name in "$PROPS" "${PROPS##*/}"; do
        [ -z "$LOGS" ] || break
        # (-ww: whole command lines; ps otherwise cuts them at $COLUMNS, and a JVM's is thousands of characters)
        LOGS=$({ ps -ww -eo args 2>/dev/null || ps -eo args 2>/dev/null; } | grep -F -- "$name" | sed -n 's/.*-Dkafka\.logs\.dir=\([^ ]*\).*/\1/p' | head -n 1)
    done
    [ -n "$LOGS" ] || LOGS="$(dirname "$PROPS")/../logs"
fi

STAGING="$OUT/.$NAME.staging"
STAGE="$STAGING/$NAME"
cleanup() { rm -rf "$STAGING" "$ARCHIVE.part"; }
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM HUP
mkdir -p "$STAGE"
NOTES="$STAGE/COLLECT.txt"
{
    echo "kafka-forensics collect on $HOST at $(date -u +%Y-%m-%dT%H:%M:%SZ) by $(id -un 2>/dev/null || echo uid "$(id -u)")"
    echo "properties: $PROPS (node $NODE)"
    echo "hashes: $SHA"
    if [ -n "$FOCUS" ]; then echo "focus:$FOCUS"; else echo "focus: none (every partition, every segment)"; fi
} > "$NOTES"
: > "$STAGING/left-out"
if [ -n "$SINCE" ]; then  # (touch -t reads local time: UTC0 makes it UTC)
    REF="$STAGING/since.ref"
    TZ=UTC0 touch -t "$(echo "$SINCE_ISO" | sed 's/^\(....\)-\(..\)-\(..\)T\(..\):\(..\):\(..\).*/\1\2\3\4\5.\6/')" "$REF" \
        || die "--since $SINCE: cannot make a reference file of that time"
fi

# Stage file $1 as $2: a hard link when $3 is "link" and the filesystem allows it, else a copy.
take() {
    if [ "$3" = link ] && ln "$1" "$2" 2>/dev/null; then return 0; fi
    if cp -p "$1" "$2" 2>/dev/null; then return 0; fi
    echo "vanished or unreadable while collecting (not archived): $1" | tee -a "$NOTES" >&2
}

# Stage the regular files of folder $1 as folder $2, links not followed, but those of the segments
# named in $3 (base names, one a line: left out by --since, with their indexes).
stage_files() {
    mkdir -p "$2"
    newest=$(ls "$1" | grep '\.log$' | sort | tail -n 1)  # the active segment: still appended to
    for f in "$1"/* "$1"/.[!.]* "$1"/..?*; do
        [ -f "$f" ] && [ ! -h "$f" ] || continue
        base=${f##*/}
        case $base in
            *?.log | *?.index | *?.timeindex | *?.txnindex) case "$NL$3$NL" in *"$NL${base%.*}$NL"*) continue ;; esac ;;
        esac
        case $base in
            "${newest%.log}".*) how=copy ;;
            *.log | *.index | *.timeindex | *.txnindex | *.snapshot | *.deleted) how=link ;;
            *) how=copy ;;  # checkpoints, meta.properties...: rewritten in place or renamed over
        esac
        take "$f" "$2/$base" "$how"
    done
}

# Stage log dir $1 (absolute) as $2 (its folder $3 in the archive): its own files (checkpoints,
# meta.properties, .kafka_cleanshutdown), then each sub-folder (partition dirs, whole) but what the
# focus leaves out.
stage_log_dir() {
    stage_files "$1" "$2" ""
    for sub in "$1"/* "$1"/.[!.]* "$1"/..?*; do
        [ -d "$sub" ] && [ ! -h "$sub" ] || continue
        name=${sub##*/}
        focus_of "$name"
        cut=""
        [ -z "$T" ] || case $WHAT in out:*) ;; *) case $T in __*) ;; *) KEPT=$((KEPT + 1)) ;; esac ;; esac
        case $WHAT in
            out:*)
                left_out "$3/$name" partition "$(find "$sub" -type f -exec ls -ln {} + | awk '/^-/ { n++; s += $5 } END { printf "%d %.0f\n", n, s }')" "${WHAT#out: }"
                continue ;;
            since)
                cut=$(since_cut "$sub" "$(hw_of "$1")")
                printf '%s\n' "$cut" | while read -r base ts; do
                    [ -n "$base" ] || continue
                    if [ "$ts" -ge 0 ]; then why="newest batch $(echo "$ts" | awk "$CIVIL"'{ print iso($1 + 0) }') (time index) is older than --since"
                    else why="last modified before --since (no time index entry)"
                    fi
                    left_out "$3/$name/$base.log" segment "$(sizes "$sub/$base.log" "$sub/$base.index" "$sub/$base.timeindex" "$sub/$base.txnindex")" \
                        "$why; its .index, .timeindex, .txnindex go with it"
                done
                cut=$(printf '%s\n' "$cut" | sed 's/ .*//') ;;
        esac
        find "$sub" -type d | while IFS= read -r dir; do
            if [ "$dir" = "$sub" ]; then stage_files "$dir" "$2/$name" "$cut"; else stage_files "$dir" "$2${dir#"$1"}" ""; fi
        done
    done
}

FOUND=0
KEPT=0  # partitions of the focused topics taken
SEEN=" "
OLDIFS=$IFS
IFS=,
for raw in $DIRS; do
    IFS=$OLDIFS
    d=$(printf '%s' "$raw" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
    [ -n "$d" ] || continue
    abs=$(absdir "$d")
    if [ -z "$abs" ]; then
        echo "log dir $d: not found" | tee -a "$NOTES" >&2
        continue
    fi
    case "$SEEN" in *" $abs "*) continue ;; esac
    SEEN="$SEEN$abs "
    case "$OUT/" in "$abs"/*) die "-o $OUT is inside log dir $abs: choose another OUT_DIR" ;; esac
    folder="logdir-$(printf '%s' "$abs" | sed 's|^/||; s|[^A-Za-z0-9._-]|_|g')"
    say "log dir $abs -> $folder"
    echo "log dir: $abs -> $folder" >> "$NOTES"
    stage_log_dir "$abs" "$STAGE/$folder" "$folder"
    FOUND=$((FOUND + 1))
done
IFS=$OLDIFS
[ "$FOUND" -gt 0 ] || die "no log dir of $PROPS exists ($DIRS)"

if [ -n "$FOCUS" ]; then
    TOTALS=$(awk '$1 == "partition" { p++; pf += $2; pb += $3 } $1 == "segment" { s++; sf += $2; sb += $3 }
        END { printf "%d partitions (%d files, %.0f bytes), %d segments (%d files, %.0f bytes)\n", p, pf, pb, s, sf, sb }' "$STAGING/left-out")
    echo "left out in all: $TOTALS" >> "$NOTES"
    if [ "$KEPT" -eq 0 ] && grep -q '^partition ' "$STAGING/left-out"; then  # (a controller has none to leave out)
        echo "no partition here is in the focus: only the log dirs' own files and the internal topics were taken" | tee -a "$NOTES" >&2
    fi
    say "focused:$FOCUS; left out $TOTALS (COLLECT.txt says which and why)"
fi

LOGS_ABS=$(absdir "$LOGS")
if [ -n "$LOGS_ABS" ]; then
    mkdir -p "$STAGE/logs"
    n=0
    for f in "$LOGS_ABS"/server.log* "$LOGS_ABS"/controller.log* "$LOGS_ABS"/state-change.log* "$LOGS_ABS"/kafkaServer.out*; do
        [ -f "$f" ] || continue
        take "$f" "$STAGE/logs/${f##*/}" copy  # appended to and rotated by log4j: copied
        n=$((n + 1))
    done
    say "$n Kafka log files from $LOGS_ABS"
    echo "kafka logs: $LOGS_ABS ($n files)" >> "$NOTES"
else
    echo "kafka logs: $LOGS not found (give -l KAFKA_LOGS_DIR)" | tee -a "$NOTES" >&2
fi
redact "$PROPS" > "$STAGE/${PROPS##*/}"

# hashes of the staged files (nothing writes them now), then the archive, then its hash
(cd "$STAGING" && find "$NAME" -type f -exec $SHA {} + | sort -k 2) > "$STAGING/files.sha256"
STATUS="$STAGING/tar.failed"
{ (cd "$STAGING" && tar -cf - "$NAME") || : > "$STATUS"; } | gzip -c > "$ARCHIVE.part"
[ ! -e "$STATUS" ] || die "tar failed; nothing archived"
mv "$ARCHIVE.part" "$ARCHIVE"
{ (cd "$OUT" && $SHA "$NAME.tar.gz"); cat "$STAGING/files.sha256"; grep -e '^focus: --' -e '^left out' "$NOTES" | sed 's/^/# /'; } > "$ARCHIVE.sha256"
say "$(wc -l < "$STAGING/files.sha256" | tr -d ' ') files archived; manifest $ARCHIVE.sha256"
echo "$ARCHIVE"
