#!/bin/sh
# apt-non-free.sh [APT_DIR]: lets apt install Debian's netperf, which is in
# the archive's non-free component only, and nothing else from non-free.
#
# It reads the machine's own Debian source (APT_DIR, default /etc/apt: a
# deb822 sources.list.d/*.sources stanza, or a one-line sources.list entry)
# and writes, under the same URIs and suites:
#   sources.list.d/sqm-non-free.sources    the non-free component (named,
#                                          not a host: the archive is the
#                                          machine's own)
#   preferences.d/sqm-non-free-netperf     a pin: netperf from non-free at
#                                          the default priority, every
#                                          other non-free package at -1
#                                          (never installed from there)
# Both files are rewritten each run, so a run after an earlier one (or
# after the archive's address changed) leaves them consistent. If the
# machine's sources already enable non-free, nothing is written: the user
# chose that, and a pin would take it away. Exits non-zero with a message
# when it finds no Debian source to extend.
set -eu

dir=${1:-/etc/apt}
src=$dir/sources.list.d/sqm-non-free.sources
pin=$dir/preferences.d/sqm-non-free-netperf

# The release's code name: the suites to extend must be this release's
# (bookworm, bookworm-updates), not a third-party repository's.
codename=""
for f in "$dir/../os-release" /etc/os-release; do
	if [ -r "$f" ]; then
		codename=$(sed -n 's/^VERSION_CODENAME=//p' "$f" | tr -d '"')
		[ -n "$codename" ] && break
	fi
done
if [ -z "$codename" ]; then
	echo "apt-non-free: no VERSION_CODENAME in /etc/os-release: cannot tell which Debian release's non-free to add for netperf" >&2
	exit 1
fi

# deb822 stanzas, one per paragraph: print "URIS|SUITES|SIGNEDBY|COMPONENTS"
# for each enabled deb stanza with a suite of this release that is not the
# security archive (netperf is in the main archive).
stanzas() {
	for f in "$dir"/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		[ "$f" = "$src" ] && continue
		awk -v cn="$codename" '
			function flush() {
				if (types ~ /(^| )deb( |$)/ && enabled != "no" && suites != "") {
					n = split(suites, s, " "); keep = ""
					for (i = 1; i <= n; i++)
						if ((s[i] == cn || index(s[i], cn "-") == 1) && s[i] !~ /-security$/)
							keep = keep (keep == "" ? "" : " ") s[i]
					if (keep != "") print uris "|" keep "|" signed "|" comps
				}
				types = ""; uris = ""; suites = ""; signed = ""; comps = ""; enabled = ""
			}
			/^[ \t]*#/ { next }
			/^[ \t]*$/ { flush(); next }
			{
				key = tolower($1); sub(/:$/, "", key); val = $0
				sub(/^[^:]*:[ \t]*/, "", val)
				if (key == "types") types = val
				else if (key == "uris") uris = val
				else if (key == "suites") suites = val
				else if (key == "signed-by") signed = val
				else if (key == "components") comps = val
				else if (key == "enabled") enabled = tolower(val)
			}
			END { flush() }' "$f"
	done
}

# One-line entries ("deb [opts] URI SUITE COMP..."), the same way.
lines() {
	for f in "$dir/sources.list" "$dir"/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		awk -v cn="$codename" '
			$1 != "deb" { next }
			{
				i = 2; signed = ""
				if ($2 ~ /^\[/) {
					while (i <= NF) {
						if ($i ~ /^\[?signed-by=/) { signed = $i; sub(/^\[?signed-by=/, "", signed); sub(/\]$/, "", signed) }
						if ($i ~ /\]$/) { i++; break }
						i++
					}
				}
				uri = $i; suite = $(i + 1); comps = ""
				for (j = i + 2; j <= NF; j++) comps = comps (comps == "" ? "" : " ") $j
				if ((suite == cn || index(suite, cn "-") == 1) && suite !~ /-security$/)
					print uri "|" suite "|" signed "|" comps
			}' "$f"
	done
}

found=$(stanzas; lines)
if [ -z "$found" ]; then
	echo "apt-non-free: found no Debian source for $codename in $dir (sources.list.d/*.sources or sources.list) to add non-free to for netperf; add Debian's archive for $codename, or install netperf by hand" >&2
	exit 1
fi
if echo "$found" | awk -F'|' '{ n = split($4, c, " "); for (i = 1; i <= n; i++) if (c[i] == "non-free") ok = 1 } END { exit !ok }'; then
	echo "apt-non-free: $dir already enables non-free for $codename; writing nothing"
	rm -f "$src" "$pin"
	exit 0
fi

# The first source's archive and signing key, with all the suites of this
# release any source names for that archive (bookworm and bookworm-updates
# may be one stanza or two lines).
uri=$(echo "$found" | head -n 1 | cut -d'|' -f1 | awk '{ print $1 }')
signed=$(echo "$found" | head -n 1 | cut -d'|' -f3)
suites=$(echo "$found" | awk -F'|' -v u="$uri" '{ n = split($1, us, " "); for (i = 1; i <= n; i++) if (us[i] == u) print $2 }' |
	tr ' ' '\n' | awk 'NF && !seen[$0]++' | tr '\n' ' ' | sed 's/ $//')

mkdir -p "$dir/sources.list.d" "$dir/preferences.d"
{
	echo "# Written by sqm's scripts/setup.sh (apt-non-free.sh): Debian's non-free"
	echo "# component, for netperf alone (see preferences.d/sqm-non-free-netperf)."
	echo "Types: deb"
	echo "URIs: $uri"
	echo "Suites: $suites"
	echo "Components: non-free"
	[ -n "$signed" ] && echo "Signed-By: $signed"
} >"$src.tmp"
mv "$src.tmp" "$src"
cat >"$pin.tmp" <<'EOF'
# Written by sqm's scripts/setup.sh (apt-non-free.sh): of Debian's non-free
# component (sources.list.d/sqm-non-free.sources) only netperf is installed.
Package: netperf
Pin: release c=non-free
Pin-Priority: 500

Package: *
Pin: release c=non-free
Pin-Priority: -1
EOF
mv "$pin.tmp" "$pin"
echo "apt-non-free: added non-free ($uri $suites) for netperf alone: $src, $pin"
