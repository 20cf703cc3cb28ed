# Sourced by the benchmark scripts: PEEL is the binary they measure, the release build unless the
# caller named one (built first when it is missing).
if [ -z "${PEEL:-}" ]; then
  [ -d /opt/swift/usr/bin ] && PATH="/opt/swift/usr/bin:$PATH"
  flags=(-c release -Xswiftc -warnings-as-errors)
  bin=$(cd "$root" && swift build "${flags[@]}" --show-bin-path)
  [ -x "$bin/peel" ] || (cd "$root" && swift build "${flags[@]}")
  PEEL="$bin/peel"
fi
export PEEL
