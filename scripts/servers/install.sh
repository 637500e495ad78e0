#!/usr/bin/env bash
# Installs the real servers that the export tests talk to, on 127.0.0.1 (docs/servers.md):
#   scripts/servers/install.sh                 all of them
#   scripts/servers/install.sh jaeger kafka    only those named
# Names: jaeger otelcol zipkin prometheus pushgateway victorialogs kafka.
#
# Everything lands in ${OPSIGHT_CACHE:-$HOME/.cache/opsight}/servers/ (never in the repo),
# Go's module and build caches included, so a second run (or CI on the same machine) only
# checks one stamp per server and takes seconds. A stamp names the pinned version and this
# script's recipe revision: changing either rebuilds that server. Prometheus and the
# Pushgateway are Debian packages (apt-get); their daemons are not started (we run our own).
set -euo pipefail

# Pinned versions.
JAEGER_VERSION=v1.76.0          # Go module github.com/jaegertracing/jaeger, binary cmd/jaeger (Jaeger v2)
OTELCOL_VERSION=v0.161.0        # the OpenTelemetry Collector's modules (scripts/servers/otelcol/go.mod)
ZIPKIN_VERSION=3.6.1            # Maven Central io.zipkin:zipkin-server, the exec jar
ZIPKIN_SHA1=5800cc1f3d2eb8f38d2d6905d59f9a0414b6d7dd
VICTORIALOGS_VERSION=v1.52.1    # Go module github.com/VictoriaMetrics/VictoriaLogs, app/victoria-logs
KAFKA_VERSION=4.4.0             # Maven Central org.apache.kafka:kafka_2.13 and its runtime dependencies
LOG4J_VERSION=2.25.5            # its slf4j 1.x binding (Kafka's own poms bring log4j-core at this version)
MAVEN_DEPENDENCY_PLUGIN=3.8.1
PROMETHEUS_PACKAGE=prometheus   # Debian 12: 2.42.0+ds-5+deb12u1 (with promtool)
PUSHGATEWAY_PACKAGE=prometheus-pushgateway  # Debian 12: 1.5.1-2+b5
RECIPE=1                        # bump when a recipe below changes in a way that needs a rebuild

ALL=(jaeger otelcol zipkin prometheus pushgateway victorialogs kafka)
CACHE="${OPSIGHT_CACHE:-$HOME/.cache/opsight}/servers"
JOBS=2

log() { echo "servers: $*" >&2; }
die() { log "error: $*"; exit 1; }

# A stamp per server: NAME is installed when its stamp holds exactly the expected line and
# FILE (what the fixtures run) is there.
stamp_line() { echo "$1 $2 recipe=$RECIPE"; }
is_installed() {  # NAME VERSION FILE
  [ -f "$CACHE/$1/.stamp" ] && [ "$(cat "$CACHE/$1/.stamp")" = "$(stamp_line "$1" "$2")" ] && [ -e "$3" ]
}
mark_installed() { stamp_line "$1" "$2" > "$CACHE/$1/.stamp"; }

find_go() {
  local go
  go=$(command -v go || true)
  [ -n "$go" ] || { [ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go; }
  [ -n "$go" ] || die "Go is needed to build $1 (go 1.26 at /usr/local/go/bin/go on this project's machines)"
  echo "$go"
}

# Go's caches under ours; the toolchain is the machine's own (the modules pinned here need <= 1.26).
go_env() {
  export GOPATH="$CACHE/go/path" GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build"
  # -modcacherw: the module cache can be deleted with rm -rf like the rest of ours.
  export GOFLAGS="-mod=mod -modcacherw -buildvcs=false" GOTOOLCHAIN=local GOMAXPROCS=$JOBS CGO_ENABLED=1
}

# Downloads MODULE@VERSION through the Go module proxy, copies it (the module cache is
# read-only) to DEST/src and builds PACKAGE there, inside the module, so that its own go.mod
# with its replace directives is the main module; the binary goes to DEST/BINARY.
go_build_module() {
  local module=$1 version=$2 package=$3 dest=$4 binary=$5 go dir
  go=$(find_go "$module")
  go_env
  mkdir -p "$dest"
  log "downloading $module@$version (Go module proxy)"
  dir=$(cd "$dest" && "$go" mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] && [ -f "$dir/go.mod" ] || die "go mod download $module@$version gave no module folder"
  rm -rf "$dest/src"
  cp -r "$dir" "$dest/src"
  chmod -R u+w "$dest/src"
  log "building $package of $module@$version (go build -p $JOBS; a few minutes when cold)"
  (cd "$dest/src" && "$go" build -p "$JOBS" -trimpath -o "$dest/$binary.new" "$package")
  mv -f "$dest/$binary.new" "$dest/$binary"
  rm -rf "$dest/src"
}

# The OpenTelemetry Collector: this repo's scripts/servers/otelcol (a main package and a
# go.mod/go.sum pinning the Collector's modules at OTELCOL_VERSION), built where the modules
# come from the Go module proxy. The stamp also names a digest of those files.
install_otelcol() {
  local source go digest dest="$CACHE/otelcol"
  source="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/otelcol"
  digest=$(cat "$source/main.go" "$source/go.mod" "$source/go.sum" | sha256sum | cut -c1-12)
  is_installed otelcol "$OTELCOL_VERSION-$digest" "$dest/otelcol" && return
  go=$(find_go otelcol)
  go_env
  mkdir -p "$dest"
  rm -rf "$dest/src"
  cp -r "$source" "$dest/src"
  log "building the OpenTelemetry Collector $OTELCOL_VERSION (go build -p $JOBS; a few minutes when cold)"
  (cd "$dest/src" && "$go" build -p "$JOBS" -trimpath -o "$dest/otelcol.new" .)
  mv -f "$dest/otelcol.new" "$dest/otelcol"
  rm -rf "$dest/src"
  "$dest/otelcol" --version > /dev/null 2>&1 || die "the built otelcol does not run"
  mark_installed otelcol "$OTELCOL_VERSION-$digest"
}

install_jaeger() {
  is_installed jaeger "$JAEGER_VERSION" "$CACHE/jaeger/jaeger" && return
  go_build_module github.com/jaegertracing/jaeger "$JAEGER_VERSION" ./cmd/jaeger "$CACHE/jaeger" jaeger
  "$CACHE/jaeger/jaeger" --help > /dev/null 2>&1 || die "the built jaeger does not run"
  mark_installed jaeger "$JAEGER_VERSION"
}

install_victorialogs() {
  is_installed victorialogs "$VICTORIALOGS_VERSION" "$CACHE/victorialogs/victoria-logs" && return
  go_build_module github.com/VictoriaMetrics/VictoriaLogs "$VICTORIALOGS_VERSION" ./app/victoria-logs \
    "$CACHE/victorialogs" victoria-logs
  "$CACHE/victorialogs/victoria-logs" -version > /dev/null || die "the built victoria-logs does not run"
  mark_installed victorialogs "$VICTORIALOGS_VERSION"
}

maven_central=https://repo1.maven.org/maven2

install_zipkin() {
  is_installed zipkin "$ZIPKIN_VERSION" "$CACHE/zipkin/zipkin.jar" && return
  command -v java > /dev/null || apt_install openjdk-17-jre-headless
  command -v curl > /dev/null || apt_install curl
  local dir="$CACHE/zipkin" url="$maven_central/io/zipkin/zipkin-server/$ZIPKIN_VERSION/zipkin-server-$ZIPKIN_VERSION-exec.jar"
  mkdir -p "$dir"
  log "downloading zipkin-server $ZIPKIN_VERSION (Maven Central, 135 MB)"
  curl -fsSL --retry 3 -o "$dir/zipkin.jar.new" "$url"
  echo "$ZIPKIN_SHA1  $dir/zipkin.jar.new" | sha1sum -c --quiet - || die "zipkin-server jar: SHA-1 mismatch"
  mv -f "$dir/zipkin.jar.new" "$dir/zipkin.jar"
  mark_installed zipkin "$ZIPKIN_VERSION"
}

install_kafka() {
  is_installed kafka "$KAFKA_VERSION" "$CACHE/kafka/libs/kafka_2.13-$KAFKA_VERSION.jar" && return
  command -v java > /dev/null || apt_install openjdk-17-jre-headless
  command -v mvn > /dev/null || apt_install maven
  local dir="$CACHE/kafka"
  mkdir -p "$dir/resolve"
  # A pom naming the broker (and an slf4j binding so that its log4j2 logging reaches our log
  # file); Maven resolves the runtime dependencies into a local repository under our cache.
  cat > "$dir/resolve/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.opsight.servers</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
  log "resolving org.apache.kafka:kafka_2.13:$KAFKA_VERSION and its runtime dependencies (Maven Central)"
  rm -rf "$dir/libs.new"
  (cd "$dir/resolve" && mvn -B -Dstyle.color=never --strict-checksums -Dmaven.repo.local="$dir/m2" \
    "org.apache.maven.plugins:maven-dependency-plugin:$MAVEN_DEPENDENCY_PLUGIN:copy-dependencies" \
    -DincludeScope=runtime -DoutputDirectory="$dir/libs.new" > "$dir/resolve/mvn.log" 2>&1) \
    || { tail -40 "$dir/resolve/mvn.log" >&2; die "Maven could not resolve kafka_2.13:$KAFKA_VERSION"; }
  [ -f "$dir/libs.new/kafka_2.13-$KAFKA_VERSION.jar" ] || die "Maven did not bring kafka_2.13-$KAFKA_VERSION.jar"
  rm -rf "$dir/libs"
  mv "$dir/libs.new" "$dir/libs"
  java -cp "$dir/libs/*" kafka.tools.StorageTool random-uuid > /dev/null 2>&1 \
    || die "kafka.tools.StorageTool does not run from $dir/libs"
  mark_installed kafka "$KAFKA_VERSION"
}

apt_updated=0  # apt-get update once a run
apt_install() {
  local sudo_cmd=() policy=/usr/sbin/policy-rc.d added_policy=0
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  # The packages' maintainer scripts would start their daemons on the default ports; a
  # policy-rc.d that says 101 (action forbidden) keeps them stopped. Left as it was after.
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee "$policy" > /dev/null
    "${sudo_cmd[@]}" chmod 755 "$policy"
    added_policy=1
  fi
  log "installing Debian packages: $*"
  local status=0
  { { [ "$apt_updated" = 1 ] || "${sudo_cmd[@]}" apt-get update -q > /dev/null; } &&
    apt_updated=1 &&
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "$@" > /dev/null; } || status=$?
  [ "$added_policy" = 1 ] && "${sudo_cmd[@]}" rm -f "$policy"
  [ "$status" = 0 ] || die "apt-get install $* failed"
}

# The Debian daemon of PACKAGE (service SERVICE) must not run: stop and disable it if it does.
keep_service_stopped() {
  local service=$1
  if command -v systemctl > /dev/null && [ -d /run/systemd/system ]; then
    systemctl disable --now "$service" > /dev/null 2>&1 || true
  elif [ -x "/etc/init.d/$service" ] && "/etc/init.d/$service" status > /dev/null 2>&1; then
    "/etc/init.d/$service" stop > /dev/null 2>&1 || true
  fi
}

install_debian_server() {
  local name=$1 package=$2 binary=$3 version
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    apt_install "$package"
  fi
  keep_service_stopped "$package"
  [ -x "$binary" ] || die "$package is installed but $binary is missing"
  version=$(dpkg-query -W -f='${Version}' "$package")
  mkdir -p "$CACHE/$name"
  is_installed "$name" "$version" "$binary" || mark_installed "$name" "$version"
}

install_prometheus() { install_debian_server prometheus "$PROMETHEUS_PACKAGE" /usr/bin/prometheus; }
install_pushgateway() { install_debian_server pushgateway "$PUSHGATEWAY_PACKAGE" /usr/bin/prometheus-pushgateway; }

main() {
  local names=("$@") name start
  [ ${#names[@]} -gt 0 ] || names=("${ALL[@]}")
  for name in "${names[@]}"; do
    case " ${ALL[*]} " in *" $name "*) ;; *) die "unknown server '$name' (known: ${ALL[*]})" ;; esac
  done
  mkdir -p "$CACHE"
  # One install at a time per cache (two test runs may start together).
  exec 9> "$CACHE/.lock"
  flock 9
  for name in "${names[@]}"; do
    start=$SECONDS
    "install_$name"
    log "$name: $(cat "$CACHE/$name/.stamp") ($((SECONDS - start)) s)"
  done
}

main "$@"
