/**
 * adduser, addgroup, deluser and delgroup as BusyBox has them: the platform's
 * hub images are Alpine, where `adduser -D -u 1234 bob` is BusyBox's applet,
 * and programs written for them call it so. The hub images here are Debian,
 * whose own adduser (a Perl program, not installed) takes other options and
 * whose BusyBox is built without these applets; these scripts take BusyBox's
 * options, words and exit codes (busybox loginutils/adduser.c, addgroup.c,
 * deluser.c: first free id from 1000, or 100-999 for -S; a group named after
 * the user unless -G; home 2755 owned by the user, from /etc/skel) and do the
 * work with shadow's useradd/groupadd/usermod/gpasswd (Debian's passwd
 * package, also installed: useradd as on the platform's Debian-based images).
 * Installed in /usr/local/sbin, ahead of /usr/sbin on PATH.
 */

/** Shared by the four: BusyBox's name rules and messages. */
const COMMON = `set -u
die() { echo "$me: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "permission denied (are you root?)"
# BusyBox's die_if_bad_username: [A-Za-z0-9_] first, then also . and -, a final $ allowed.
check_name() {
  n=$1 i=0
  while [ -n "$n" ]; do
    c=\${n%"\${n#?}"}; n=\${n#?}
    case $c in
    [A-Za-z0-9_]) ;;
    [.-]) [ "$i" -gt 0 ] || bad "$c" "$i" ;;
    '$') [ "$i" -gt 0 ] && [ -z "$n" ] || bad "$c" "$i" ;;
    *) bad "$c" "$i" ;;
    esac
    i=$((i + 1))
  done
  [ "$i" -gt 0 ] || die "illegal character with code 0 at position 0"
  [ "$i" -lt 256 ] || die "name is too long"
}
bad() { die "illegal character with code $(printf %d "'$1") at position $2"; }
number() {
  case $1 in '' | *[!0-9]*) die "invalid number '$1'" ;; esac
  [ "$1" -le 60000 ] || die "number $1 is not in 0..60000 range"
}
# shadow's tools refuse names BusyBox takes (upper case): let them, with the option of their version.
badname=$(useradd --help 2>&1 | grep -o -e '--badnames*' | head -n 1)
groupbadname=$(groupadd --help 2>&1 | grep -o -e '--badnames*' | head -n 1)
run() { out=$("$@" 2>&1) || die "\${out:-$1 failed}"; }
`;

const ADDUSER = `#!/bin/sh
# adduser as BusyBox has it (see addgroup's comment in sandbox-kit's simulator/images/busybox-users.ts).
me=adduser
${COMMON}
usage() {
  cat >&2 <<'EOF'
Usage: adduser [OPTIONS] USER [GROUP]

Create new user, or add USER to GROUP

	-h DIR		Home directory
	-g GECOS	GECOS field
	-s SHELL	Login shell
	-G GRP		Group
	-S		Create a system user
	-D		Don't assign a password
	-H		Don't create home directory
	-u UID		User id
	-k SKEL		Skeleton directory (/etc/skel)
EOF
  exit 1
}
for a do
  shift
  case $a in
  --home) a=-h ;; --gecos) a=-g ;; --shell) a=-s ;; --ingroup) a=-G ;; --uid) a=-u ;; --skel) a=-k ;;
  --disabled-password | --empty-password) a=-D ;; --system) a=-S ;; --no-create-home) a=-H ;;
  --help) usage ;;
  esac
  set -- "$@" "$a"
done
home='' gecos='Linux User,,,' shell='' group='' system='' nopass='' nohome='' uid='' skel=/etc/skel opts=''
while getopts h:g:s:G:SDHu:k: o; do
  opts=1
  case $o in
  h) home=$OPTARG ;; g) gecos=$OPTARG ;; s) shell=$OPTARG ;; G) group=$OPTARG ;; S) system=1 nopass=1 ;;
  D) nopass=1 ;; H) nohome=1 ;; u) uid=$OPTARG ;; k) skel=$OPTARG ;; *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] && [ $# -le 2 ] || usage
name=$1
# Two names and no option: add an existing user to an existing group.
[ -z "$opts" ] && [ $# -eq 2 ] && exec "\${0%/*}/addgroup" "$1" "$2"
check_name "$name"
[ -n "$home" ] || home=/home/$name
if [ -n "$system" ]; then
  [ -n "$group" ] || group=nogroup
  [ -n "$shell" ] || shell=/sbin/nologin
fi
# BusyBox: the caller's $SHELL, else its passwd entry's shell, else /bin/sh.
[ -n "$shell" ] || shell=\${SHELL:-$(getent passwd "$(id -u)" | cut -d: -f7)}
[ -n "$shell" ] || shell=/bin/sh
gid=''
if [ -n "$group" ]; then
  gid=$(getent group "$group" | cut -d: -f3)
  if [ -z "$gid" ]; then
    case $group in '' | *[!0-9]*) die "unknown group $group" ;; *) gid=$group ;; esac
  fi
fi
getent passwd "$name" >/dev/null && die "user '$name' in use"
if [ -n "$uid" ]; then
  number "$uid"
  max=4294967295
elif [ -n "$system" ]; then uid=100 max=999
else uid=1000 max=64999
fi
# The first free uid from there (and free as a gid too when the user gets its own group), as BusyBox picks it.
while getent passwd "$uid" >/dev/null || { [ -z "$gid" ] && getent group "$uid" >/dev/null; }; do
  uid=$((uid + 1))
  [ "$uid" -le "$max" ] || die "no uids left"
done
if [ -z "$gid" ]; then
  gid=$uid
  getent group "$name" >/dev/null && die "group '$name' in use"
  run groupadd $groupbadname -g "$gid" "$name"
fi
run useradd $badname -M -N -u "$uid" -g "$gid" -d "$home" -s "$shell" -c "$gecos" "$name"
[ -z "$group" ] || run gpasswd -a "$name" "$group"
if [ -z "$nohome" ]; then
  if mkdir "$home" 2>/dev/null; then
    [ ! -d "$skel" ] || cp -a "$skel"/. "$home"/ 2>/dev/null
    chown -R "$uid:$gid" "$home" 2>/dev/null
  fi
  # As BusyBox: a home it cannot make or give to the user is said, and the user stays.
  if [ ! -d "$home" ]; then
    echo "$me: $home: No such file or directory" >&2
  elif ! err=$(chown "$uid:$gid" "$home" 2>&1 && chmod 2755 "$home" 2>&1); then
    echo "$me: $home: \${err##*: }" >&2
  fi
fi
[ -n "$nopass" ] && exit 0
exec passwd -- "$name"
`;

const ADDGROUP = `#!/bin/sh
# addgroup as BusyBox has it: the platform's hub images are Alpine (BusyBox's
# applets); these Debian images take the same options and words, made with
# shadow's groupadd and gpasswd. sandbox-kit: simulator/images/busybox-users.ts.
me=addgroup
${COMMON}
usage() {
  cat >&2 <<'EOF'
Usage: addgroup [-g GID] [-S] [USER] GROUP

Add a group or add a user to a group

	-g GID	Group id
	-S	Create a system group
EOF
  exit 1
}
for a do
  shift
  case $a in --gid) a=-g ;; --system) a=-S ;; --help) usage ;; esac
  set -- "$@" "$a"
done
gid='' system=''
while getopts g:S o; do
  case $o in g) gid=$OPTARG ;; S) system=1 ;; *) usage ;; esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] && [ $# -le 2 ] || usage
if [ $# -eq 2 ]; then
  [ -z "$gid" ] || usage
  getent passwd "$1" >/dev/null || die "unknown user $1"
  members=$(getent group "$2") || die "unknown group $2"
  case ,\${members##*:}, in *,"$1",*) exit 0 ;; esac
  run gpasswd -a "$1" "$2"
  exit 0
fi
check_name "$1"
getent group "$1" >/dev/null && die "group '$1' in use"
if [ -n "$gid" ]; then
  number "$gid"
  getent group "$gid" >/dev/null && die "gid '$gid' in use"
else
  if [ -n "$system" ]; then gid=100 max=999; else gid=1000 max=64999; fi
  while getent group "$gid" >/dev/null; do
    [ "$gid" -lt "$max" ] || die "no gids left"
    gid=$((gid + 1))
  done
fi
run groupadd $groupbadname -g "$gid" "$1"
`;

const DELUSER = `#!/bin/sh
# deluser as BusyBox has it (see addgroup's comment): USER, or USER GROUP to take USER out of GROUP.
me=deluser
${COMMON}
usage() {
  echo "Usage: deluser [--remove-home] USER [GROUP]" >&2
  exit 1
}
remove=''
[ "\${1:-}" = --remove-home ] && { remove=-r; shift; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
getent passwd "$1" >/dev/null || die "unknown user $1"
if [ $# -eq 2 ]; then
  getent group "$2" >/dev/null || die "unknown group $2"
  run gpasswd -d "$1" "$2"
  exit 0
fi
# userdel also removes the user's own group (USERGROUPS_ENAB), as BusyBox's deluser does.
run userdel $remove "$1"
`;

const DELGROUP = `#!/bin/sh
# delgroup as BusyBox has it (see addgroup's comment): GROUP, or USER GROUP to take USER out of GROUP.
me=delgroup
${COMMON}
usage() {
  echo "Usage: delgroup [USER] GROUP" >&2
  exit 1
}
[ $# -ge 1 ] && [ $# -le 2 ] || usage
if [ $# -eq 2 ]; then
  getent passwd "$1" >/dev/null || die "unknown user $1"
  getent group "$2" >/dev/null || die "unknown group $2"
  run gpasswd -d "$1" "$2"
  exit 0
fi
gid=$(getent group "$1" | cut -d: -f3)
[ -n "$gid" ] || die "unknown group $1"
getent passwd | while IFS=: read -r user _ _ ugid _; do
  [ "$ugid" != "$gid" ] || die "'$user' still has '$1' as their primary group!"
done || exit 1
run groupdel "$1"
`;

/** The scripts, by where the images have them. */
export const BUSYBOX_USER_TOOLS: { path: string; content: string }[] = [
  { path: "/usr/local/sbin/adduser", content: ADDUSER },
  { path: "/usr/local/sbin/addgroup", content: ADDGROUP },
  { path: "/usr/local/sbin/deluser", content: DELUSER },
  { path: "/usr/local/sbin/delgroup", content: DELGROUP },
];
