#!/bin/sh
# kafka-forensics collect: run on each Kafka broker (or KRaft controller) host, as the user that
# runs Kafka or root. Needs only a POSIX shell, find, ln, cp, tar, gzip and sha256sum (or shasum).
#
#   sh kafka-forensics-collect.sh [-l KAFKA_LOGS_DIR] [-o OUT_DIR] [-q] SERVER_PROPERTIES
#
# Reads log.dirs (else log.dir, else Kafka's default /tmp/kafka-logs) and metadata.log.dir from
# SERVER_PROPERTIES, and archives into OUT_DIR (default: the current directory):
#   OUT_DIR/kafka-forensics-<host>-node<id>-<UTC time>.tar.gz          every log dir, whole;
#       Kafka's server.log*, controller.log*, state-change.log*, kafkaServer.out* (from -l, else
#       $LOG_DIR, else logs/ beside the properties' folder, else the -Dkafka.logs.dir of the
#       broker running with these properties); the properties with every secret redacted;
#       COLLECT.txt (what was taken, how)
#   OUT_DIR/kafka-forensics-<host>-node<id>-<UTC time>.tar.gz.sha256   SHA-256 of the archive and
#       of every file in it: after `tar -xzf`, `sha256sum -c` beside them checks everything.
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
usage() { die "usage: $0 [-l KAFKA_LOGS_DIR] [-o OUT_DIR] [-q] SERVER_PROPERTIES"; }

LOGS=""
OUT=.
QUIET=""
while getopts l:o:qh opt; do
    case $opt in
        l) LOGS=$OPTARG ;;
        o) OUT=$OPTARG ;;
        q) QUIET=1 ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || usage
PROPS=$1
[ -f "$PROPS" ] && [ -r "$PROPS" ] || die "$PROPS: not a readable file"
[ -d "$OUT" ] && [ -w "$OUT" ] || die "$OUT: not a writable directory (-o)"

if command -v sha256sum >/dev/null 2>&1; then SHA="sha256sum"
elif command -v shasum >/dev/null 2>&1; then SHA="shasum -a 256"
else die "neither sha256sum nor shasum found"
fi

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
} > "$NOTES"

# Stage file $1 as $2: a hard link when $3 is "link" and the filesystem allows it, else a copy.
take() {
    if [ "$3" = link ] && ln "$1" "$2" 2>/dev/null; then return 0; fi
    if cp -p "$1" "$2" 2>/dev/null; then return 0; fi
    echo "vanished or unreadable while collecting (not archived): $1" | tee -a "$NOTES" >&2
}

# Stage log dir $1 (absolute) as $2: every folder and regular file below it, links not followed.
stage_log_dir() {
    find "$1" -type d | while IFS= read -r dir; do
        dest="$2${dir#"$1"}"
        mkdir -p "$dest"
        newest=$(ls "$dir" | grep '\.log$' | sort | tail -n 1)  # the active segment: still appended to
        for f in "$dir"/* "$dir"/.[!.]* "$dir"/..?*; do
            [ -f "$f" ] && [ ! -h "$f" ] || continue
            base=${f##*/}
            case $base in
                "${newest%.log}".*) how=copy ;;
                *.log | *.index | *.timeindex | *.txnindex | *.snapshot | *.deleted) how=link ;;
                *) how=copy ;;  # checkpoints, meta.properties...: rewritten in place or renamed over
            esac
            take "$f" "$dest/$base" "$how"
        done
    done
}

FOUND=0
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
    stage_log_dir "$abs" "$STAGE/$folder"
    FOUND=$((FOUND + 1))
done
IFS=$OLDIFS
[ "$FOUND" -gt 0 ] || die "no log dir of $PROPS exists ($DIRS)"

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
{ (cd "$OUT" && $SHA "$NAME.tar.gz"); cat "$STAGING/files.sha256"; } > "$ARCHIVE.sha256"
say "$(wc -l < "$STAGING/files.sha256" | tr -d ' ') files archived; manifest $ARCHIVE.sha256"
echo "$ARCHIVE"
