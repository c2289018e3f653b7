"""The POSIX sh scripts behind detached runs. Every script takes $1 state directory, $2 run name,
$3 node, so a run lives in <state>/<name>/<node>/ (the lab's servers share one filesystem):

    command   the command, as the shell reads it       via      tmux | systemd | setsid
    pid       the supervisor                          boot     the boot id it started under
    start     its start time (/proc/PID/stat field 22) group    its process group (its session's)
    output    stdout and stderr, as they are written   started / ended   epoch seconds
    rc        the exit status, written last            stopped  `fleet stop` asked it to end
"""

from __future__ import annotations

_PRELUDE = r"""
set -u
umask 077
base=$1 name=$2 node=$3
case $base in "~/"*) base=$HOME/${base#"~/"} ;; esac
dir=$base/$name/$node
me=$(id -u)
refuse() { echo "gpunet: $*" >&2; exit 2; }
# OpenSSH's StrictModes for the state directory and the run's: every component of the physical
# path $1 owned by this user or root and writable by no one else. A root-owned sticky directory
# such as /tmp is let pass above the state directory $2 (no one else can rename or remove what is
# in it), never as the state directory or below it.
private() {
  p=$1
  while :; do
    info=$(stat -c '%u %a' -- "$p") || return 1
    owner=${info% *} mode=0${info#* }
    [ "$owner" = "$me" ] || [ "$owner" = 0 ] ||
      { echo "gpunet: $p belongs to uid $owner: refusing to keep run state there" >&2; return 1; }
    if [ $((mode & 022)) -ne 0 ] && ! { [ "$owner" = 0 ] && [ $((mode & 01000)) -ne 0 ] && above "$p" "$2"; }; then
      echo "gpunet: $p is writable by others: refusing to keep run state there" >&2; return 1
    fi
    [ "$p" = / ] && return 0
    p=${p%/*}
    [ -n "$p" ] || p=/
  done
}
above() { case $1/ in "${2%/}"/*) return 1 ;; esac; }  # $1 is not $2 nor below it
# The nearest existing part of $dir, checked on its physical path; once $dir exists it is used by
# its physical path, so what was checked is what is read, written and signalled.
checked() {
  probe=$dir
  while [ ! -e "$probe" ] && [ ! -L "$probe" ]; do probe=${probe%/*}; [ -n "$probe" ] || probe=/; done
  physical=$(cd -P -- "$probe" 2>/dev/null && pwd -P) || refuse "cannot enter $probe"
  state_root=$(cd -P -- "$base" 2>/dev/null && pwd -P) || state_root=//none
  private "$physical" "$state_root" || exit 2
  if [ "$probe" = "$dir" ]; then dir=$physical; fi
}
checked
server="gpunet-$(printf '%s' "$dir" | cksum | cut -d ' ' -f 1)"
# The supervisor gpunet started, proven before it is trusted or signalled: a pid above 1 whose
# start time (since boot, /proc/PID/stat field 22) and command line are the ones it recorded, in a
# process group that is its session's (made by setsid, systemd or tmux for the run) and is the
# group it recorded. A reused pid, or a pid file naming init, another user's process or the admin's
# shell, is no run of gpunet's.
ours() {
  pid=$(cat "$dir/pid" 2>/dev/null) || return 1
  case $pid in ''|*[!0-9]*) return 1 ;; esac
  [ "$pid" -gt 1 ] || return 1
  fields=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  set -- ${fields##*") "}
  [ $# -ge 20 ] && [ "${20}" = "$(cat "$dir/start" 2>/dev/null)" ] || return 1
  [ "$3" = "$4" ] && [ "$3" -gt 1 ] && [ "$3" = "$(cat "$dir/group" 2>/dev/null)" ] || return 1
  [ "$(cat -v "/proc/$pid/cmdline" 2>/dev/null)" = "sh^@$dir/run.sh^@$dir^@" ] || return 1
  group=$3
}
alive() {
  ours && [ "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)" = "$(cat "$dir/boot" 2>/dev/null)" ]
}
state() {
  if [ ! -d "$dir" ]; then echo missing
  elif [ -f "$dir/rc" ]; then echo done
  elif [ -f "$dir/stopped" ]; then echo stopped
  elif alive; then echo running
  else echo lost
  fi
}
"""

# $4 how (auto|tmux|systemd|setsid) $5 the command. The supervisor (run.sh) tees the output to
# the run's file (and to the tmux pane), then writes rc; the start waits until it has a pid.
START = _PRELUDE + r"""
via=$4 command=$5
if [ "$(state)" = running ]; then
  echo "gpunet: run $name is still running here (pid $(cat "$dir/pid")): stop it or pick another name" >&2
  exit 3
fi
if [ "$via" = auto ]; then
  if command -v tmux >/dev/null 2>&1; then via=tmux
  elif [ "$(id -u)" = 0 ] && [ -d /run/systemd/system ] && command -v systemd-run >/dev/null 2>&1; then via=systemd
  else via=setsid
  fi
fi
case $via in
  tmux|setsid) need=$via ;;
  systemd) need=systemd-run ;;
  *) echo "gpunet: unknown way to detach: $via" >&2; exit 2 ;;
esac
command -v "$need" >/dev/null 2>&1 || { echo "gpunet: $need is not installed here" >&2; exit 2; }
rm -rf -- "$dir" && mkdir -p -m 700 -- "$dir" || { echo "gpunet: cannot create $dir" >&2; exit 1; }
checked
printf '%s\n' "$command" > "$dir/command"
echo "$via" > "$dir/via"
date +%s > "$dir/started"
cat /proc/sys/kernel/random/boot_id > "$dir/boot" 2>/dev/null
cat > "$dir/run.sh" <<'SUPERVISOR'
dir=$1
fields=$(cat /proc/$$/stat) && set -- ${fields##*") "}
echo "${20}" > "$dir/start"
echo "$3" > "$dir/group"
echo $$ > "$dir/pid"
export PYTHONUNBUFFERED=1
{ sh "$dir/command"; echo $? > "$dir/rc.tmp"; } 2>&1 | tee -a "$dir/output"
date +%s > "$dir/ended"
mv -f "$dir/rc.tmp" "$dir/rc"
SUPERVISOR
case $via in
  tmux) tmux -L "$server" -f /dev/null new-session -d -s "gpunet-$name" -x 160 -y 48 \
          sh "$dir/run.sh" "$dir" </dev/null >/dev/null 2>&1 ;;
  systemd) systemd-run --quiet --collect --unit "gpunet-run-$name" --same-dir -E HOME="$HOME" -E PATH="$PATH" \
             sh "$dir/run.sh" "$dir" </dev/null >/dev/null 2>&1 ;;
  setsid) setsid -f sh "$dir/run.sh" "$dir" </dev/null >/dev/null 2>&1 ;;
esac || { echo "gpunet: $via could not start the run" >&2; exit 1; }
i=0
while [ ! -s "$dir/pid" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -s "$dir/pid" ] || { echo "gpunet: the run did not start within 10 s (see $dir)" >&2; exit 1; }
echo "state=running"
echo "via=$via"
echo "pid=$(cat "$dir/pid")"
echo "dir=$dir"
"""

# $4 seconds to wait while it runs $5 lines of output to show (0: none, -1: all).
STATUS = _PRELUDE + r"""
wait=$4 lines=$5
end=$(( $(date +%s) + wait ))
while [ "$(state)" = running ] && [ "$(date +%s)" -lt "$end" ]; do sleep 1; done
echo "state=$(state)"
[ -d "$dir" ] || exit 0
for key in via pid started ended rc; do [ -f "$dir/$key" ] && echo "$key=$(cat "$dir/$key")"; done
echo "dir=$dir"
echo "--"
if [ "$lines" = -1 ]; then cat "$dir/output" 2>/dev/null
elif [ "$lines" -gt 0 ]; then tail -n "$lines" "$dir/output" 2>/dev/null
fi
exit 0
"""

# Follows the output until the run ends (tail --pid), then prints the status line.
FOLLOW = _PRELUDE + r"""
[ -d "$dir" ] || { echo "gpunet: no run $name here" >&2; exit 2; }
if [ "$(state)" = running ] && ours; then tail -n +1 -s 0.3 -f --pid="$pid" "$dir/output"
else cat "$dir/output" 2>/dev/null
fi
"""

# Interactive: the tmux session itself while it lives, else the output followed or shown.
ATTACH = _PRELUDE + r"""
[ -d "$dir" ] || { echo "gpunet: no run $name here" >&2; exit 2; }
if [ "$(cat "$dir/via")" = tmux ] && tmux -L "$server" has-session -t "gpunet-$name" 2>/dev/null; then
  exec tmux -L "$server" attach-session -t "gpunet-$name"
fi
if [ "$(state)" = running ] && ours; then exec tail -n +1 -s 0.3 -f --pid="$pid" "$dir/output"; fi
cat "$dir/output" 2>/dev/null
echo "gpunet: run $name is $(state)$( [ -f "$dir/rc" ] && echo ", exit $(cat "$dir/rc")")"
"""

# The supervisor's whole process group, once proven (ours): never a pid or group it cannot prove.
STOP = _PRELUDE + r"""
[ -d "$dir" ] || { echo "state=missing"; exit 0; }
if [ "$(state)" = running ] && alive; then
  touch "$dir/stopped"
  kill -TERM "-$group" 2>/dev/null  # dash takes no "--" here: a negative pid is the group
  i=0  # until it is reaped (a zombie is no longer provably ours, but still holds its pid)
  while [ -e "/proc/$pid" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  alive && kill -KILL "-$group" 2>/dev/null
fi
echo "state=$(state)"
"""
