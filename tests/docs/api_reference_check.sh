#!/usr/bin/env bash
# The Doxygen API reference of include/sqllock/ builds without a single warning (every public
# symbol documented, no broken doc command). Usage: api_reference_check.sh DOXYGEN DOXYFILE OUTPUT_DIR
set -uo pipefail
doxygen=$1 doxyfile=$2 out=$3
if [[ ! -x $doxygen ]]; then
  echo "api_reference_check: doxygen not found (Debian package doxygen; scripts/install-deps.sh)" >&2
  exit 1
fi
rm -rf "$out" && mkdir -p "$out"
"$doxygen" "$doxyfile"
rc=$?
if [[ -s $out/warnings.log ]]; then
  echo "api_reference_check: doxygen warnings:" >&2
  cat "$out/warnings.log" >&2
  exit 1
fi
[[ $rc -eq 0 ]] || { echo "api_reference_check: doxygen exited $rc" >&2; exit 1; }
[[ -s $out/html/index.html && -s $out/html/structsqllock_1_1lease__event.html ]] || {
  echo "api_reference_check: the reference was not written to $out/html" >&2; exit 1; }
echo "api reference: $out/html/index.html"
