#!/bin/sh
# Stand-in for a network filesystem client (rclone mount, sshfs, a FUSE
# daemon) driven by the agent's `command` drive backend in tests. The "remote"
# is a local store directory, bind-mounted. The drive name picks a behaviour:
#   fail*    print an error and exit 3 without mounting
#   hang*    never mount (the agent's readiness timeout must kill it)
#   daemon*  mount, then exit 0 (a client that daemonizes)
#   other    mount and stay in the foreground until unmounted (a FUSE daemon)
# usage: fake-remote-fs.sh mount|unmount <store> <driveName> <drivePath> <mountPath> <readOnly>
set -eu
action=$1 store=$2 name=$3 sub=$4 target=$5 ro=$6

if [ "$action" = unmount ]; then
  exec umount "$target"
fi

case "$name" in
  fail*) echo "remote refused drive $name: permission denied" >&2; exit 3 ;;
  hang*) echo $$ > "$store/$name.pid"; echo "connecting to remote..."; exec sleep 600 ;;
esac
echo $$ > "$store/$name.pid"
mkdir -p "$store/$name$sub"
mount --bind "$store/$name$sub" "$target"
if [ "$ro" = true ]; then mount -o remount,bind,ro "$target"; fi
case "$name" in
  daemon*) exit 0 ;;
esac
while mountpoint -q "$target"; do sleep 0.1; done
