#!/bin/sh
# The node image's entrypoint (as in the official image): run the command with node when the first
# argument is an option or not a command.
set -e
if [ "${1#-}" != "${1}" ] || [ -z "$(command -v "${1}")" ] || { [ -f "${1}" ] && ! [ -x "${1}" ]; }; then
  set -- node "$@"
fi
exec "$@"
