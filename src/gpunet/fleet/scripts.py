"""The POSIX sh scripts nodes run for transfers: operands arrive as positional parameters, never
pasted into the text, and a script never leaves a half-written file under the final name."""

from __future__ import annotations

# $1 archive (as it arrived) $2 destination directory $3 name $4 compression.
# Unpacks beside the destination (same filesystem: the final step is one rename), checks every
# file with sha256sum, then renames; a directory replaced is first moved aside.
COPY_FINISH = r"""
set -u
archive=$1 dest=$2 name=$3 compress=$4
work=$archive.d
fail() { rm -rf -- "$work" "$archive"; echo "gpunet: $*" >&2; exit 1; }
[ -d "$dest" ] || fail "no directory $dest here"
[ -f "$archive" ] || fail "the archive did not arrive"
find "$dest" -maxdepth 1 -name ".gpunet-copy-*" -mmin +1440 -exec rm -rf -- {} + 2>/dev/null
case $compress in
  zstd) command -v zstd >/dev/null 2>&1 || fail "zstd is not installed here (use --compress gzip)"
        set -- zstd -q -d -c ;;
  gzip) set -- gzip -d -c ;;
  *) set -- cat ;;
esac
mkdir -m 700 -- "$work" || fail "cannot create $work"
"$@" < "$archive" | tar -x --no-same-owner -f - -C "$work" || fail "the archive could not be unpacked"
rm -f -- "$archive"
sums=$(cd "$work/payload" && sha256sum --quiet --strict -c ../manifest.sha256 2>&1) || fail "checksum mismatch: $sums"
new=$work/payload/$name
final=$dest/$name
if [ -d "$new" ] || { [ -d "$final" ] && [ ! -L "$final" ]; }; then
  if [ -e "$final" ] || [ -L "$final" ]; then mv -T -- "$final" "$work/old" || fail "cannot move $final aside"; fi
fi
if ! mv -T -- "$new" "$final"; then
  [ -e "$work/old" ] && mv -T -- "$work/old" "$final"
  fail "cannot rename into $final"
fi
rm -rf -- "$work"
echo "$final"
"""

# $1 what to gather $2 compression (auto: zstd where the node has it). Prints archive=, compress=
# and top= lines, then the sha256 of every file (taken before tar reads them: a file that changes
# in between fails the check on the admin host); tar's own status catches a file that vanishes.
GATHER_PACK = r"""
set -u
archive=
fail() { [ -n "$archive" ] && rm -f -- "$archive"; echo "gpunet: $*" >&2; exit 1; }
[ -e "$1" ] || fail "no $1 here"
real=$(readlink -f -- "$1") || fail "cannot resolve $1"
compress=$2
if [ "$compress" = auto ]; then
  if command -v zstd >/dev/null 2>&1; then compress=zstd; else compress=gzip; fi
fi
case $compress in
  zstd) command -v zstd >/dev/null 2>&1 || fail "zstd is not installed here (use --compress gzip)"
        set -- zstd -q -T0 -1 -c ;;
  gzip) set -- gzip -1 -c ;;
  *) set -- cat ;;
esac
archive=$(mktemp "${TMPDIR:-/tmp}/gpunet-gather.XXXXXXXX") || fail "cannot create a temporary file"
cd -- "$(dirname -- "$real")" || fail "cannot enter the directory of $real"
top=$(basename -- "$real")
echo "archive=$archive"
echo "compress=$compress"
echo "top=$top"
find "./$top" -type f -exec sha256sum -- {} + || fail "cannot read every file of $real"
rc=$( { { tar -c -f - -- "$top"; echo $? >&4; } | "$@" > "$archive"; } 4>&1 )
[ "$rc" = 0 ] || fail "tar exit $rc: files changed or vanished while they were read"
"""

REMOVE = 'rm -rf -- "$@"'
