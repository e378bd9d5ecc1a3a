#!/bin/sh
# A wrapper around the ASTRA-Sim double as users write them: a background job (its pid appended
# to $BLIS_ASTRA_WRAPPER_PIDS) and the simulator behind a pipeline, so that neither is the
# process the driver started.
sleep 600 &
echo $! >> "$BLIS_ASTRA_WRAPPER_PIDS"
"$BLIS_ASTRA_WRAPPER_TARGET" "$@" | cat
