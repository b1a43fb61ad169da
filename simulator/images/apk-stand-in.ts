/**
 * `apk` for the Alpine stand-ins (stand-ins.ts): the stand-in of `node:22-alpine` is Debian, so a template's
 * `RUN apk update && apk add --no-cache git curl netcat-openbsd bash` (the shape of every platform hub
 * Dockerfile) installs the Debian packages that do what those Alpine packages do, with apt-get. Only the
 * packages listed here are known; any other fails the whole `apk add`, naming it, before anything is
 * installed. `apk update` refreshes apt's lists. What apk does beyond add, del, update and info is refused.
 */

/** Alpine package → the Debian packages standing in for it ([] : nothing to install, Debian already has it). */
export const APK_TO_DEBIAN: Readonly<Record<string, readonly string[]>> = {
  bash: ["bash"],
  "build-base": ["build-essential"],
  "busybox-extras": ["busybox"],
  "bind-tools": ["dnsutils"],
  "ca-certificates": ["ca-certificates"],
  coreutils: ["coreutils"],
  curl: ["curl"],
  file: ["file"],
  findutils: ["findutils"],
  "g++": ["g++"],
  gawk: ["gawk"],
  gcc: ["gcc"],
  git: ["git"],
  "git-lfs": ["git-lfs"],
  gnupg: ["gnupg"],
  grep: ["grep"],
  gzip: ["gzip"],
  iproute2: ["iproute2"],
  "iputils-ping": ["iputils-ping"],
  iputils: ["iputils-ping"],
  jq: ["jq"],
  less: ["less"],
  "libc6-compat": [], // glibc already
  "libffi-dev": ["libffi-dev"],
  "linux-headers": ["linux-libc-dev"],
  make: ["make"],
  "musl-dev": ["libc6-dev"],
  nano: ["nano"],
  "net-tools": ["net-tools"],
  "netcat-openbsd": ["netcat-openbsd"],
  nodejs: [], // the node stand-ins have it
  npm: [], // and npm
  openssh: ["openssh-client", "openssh-server"],
  "openssh-client": ["openssh-client"],
  "openssh-server": ["openssh-server"],
  openssl: ["openssl"],
  "openssl-dev": ["libssl-dev"],
  "postgresql-client": ["postgresql-client"],
  procps: ["procps"],
  "py3-pip": ["python3-pip"],
  "py3-setuptools": ["python3-setuptools"],
  python3: ["python3"],
  "python3-dev": ["python3-dev"],
  ripgrep: ["ripgrep"],
  rsync: ["rsync"],
  sed: ["sed"],
  shadow: ["passwd"],
  sqlite: ["sqlite3"],
  sudo: ["sudo"],
  tar: ["tar"],
  tini: ["tini"],
  tzdata: ["tzdata"],
  unzip: ["unzip"],
  util_linux: ["util-linux"],
  "util-linux": ["util-linux"],
  vim: ["vim"],
  wget: ["wget"],
  xz: ["xz-utils"],
  zip: ["zip"],
};

/** The `case` arms of the script's lookup, generated from the map. */
function caseArms(): string {
  return Object.entries(APK_TO_DEBIAN)
    .map(([apk, debs]) => `    ${JSON.stringify(apk)}) echo ${JSON.stringify(debs.join(" ") || "-")} ;;`)
    .join("\n");
}

/** The /sbin/apk script of the Alpine stand-ins (POSIX sh: the stand-in's /bin/sh is dash). */
export function apkScript(): string {
  return `#!/bin/sh
# sandbox-kit's apk: this image is the offline stand-in of an Alpine image, built from Debian packages.
# apk add installs the Debian equivalents of the Alpine packages listed below with apt-get.
set -e
export DEBIAN_FRONTEND=noninteractive
known() {
  case "$1" in
${caseArms()}
    *) return 1 ;;
  esac
}
known_list() {
  echo "${Object.keys(APK_TO_DEBIAN).join(" ")}"
}
lists_empty() { ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; }
say() { echo "apk (sandbox-kit stand-in): $*"; }
cmd="$1"
[ $# -gt 0 ] && shift
case "$cmd" in
  update)
    say "apt-get update (this image is Debian standing in for Alpine)"
    apt-get update -qq
    ;;
  add|del)
    update=no
    packages=""
    while [ $# -gt 0 ]; do
      case "$1" in
        --no-cache|--quiet|-q|--no-progress|--allow-untrusted|--upgrade|-u|--latest|-l|--force-broken-world|--no-scripts) ;;
        --update|-U|--update-cache) update=yes ;;
        --virtual|-t|--repository|-X|--repositories-file|--arch|--root|-p|--keys-dir) shift ;;
        --virtual=*|--repository=*|--arch=*|--root=*|--keys-dir=*|-t*|-X*) ;;
        -*) say "option $1 is not emulated"; exit 1 ;;
        *) packages="$packages \${1%%[=<>~]*}" ;;
      esac
      shift
    done
    debs=""
    unknown=""
    for p in $packages; do
      if d=$(known "$p"); then
        [ "$d" = "-" ] || debs="$debs $d"
      else
        unknown="$unknown $p"
      fi
    done
    if [ -n "$unknown" ]; then
      say "ERROR: no Debian equivalent known for:$unknown"
      say "this image is Debian standing in for Alpine; the Alpine packages it maps are: $(known_list)"
      say "install Debian packages with apt-get instead (apt-get update && apt-get install -y <package>)"
      exit 1
    fi
    [ -n "$debs" ] || exit 0
    if [ "$cmd" = del ]; then
      apt-get remove -y -qq $debs
      exit 0
    fi
    if [ "$update" = yes ] || lists_empty; then apt-get update -qq; fi
    say "apt-get install$debs"
    apt-get install -y -qq --no-install-recommends $debs
    ;;
  info|--version|-V)
    say "Debian standing in for Alpine; apt-get installs the packages: dpkg-query -W lists them"
    ;;
  *)
    say "apk $cmd is not emulated here (known: add, del, update, info); this image is Debian: use apt-get"
    exit 1
    ;;
esac
`;
}
