# The PASS/FAIL report shared by scripts/package-check.sh and scripts/qemu-arm64.sh. Sourced, not run:
#   source "$root/scripts/check-lib.sh"
# Each check prints one line; `failures` counts the FAILs, for the caller's summary line and exit code.

failures=0

# check NAME CONDITION-EXIT-CODE [DETAIL]: "PASS NAME[: DETAIL]" when the exit code is 0, else "FAIL ..." (counted).
check() {
  if [ "$2" = 0 ]; then echo "PASS $1${3:+: $3}"; else echo "FAIL $1${3:+: $3}"; failures=$((failures + 1)); fi
}
