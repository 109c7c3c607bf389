// Where the helper programs that imports run are found. Decided here, in the
// tool layer (pacset, pacset-trace, the Python module), and passed to model/
// as HelperPrograms: the libraries look nothing up themselves.
#pragma once

#include "model/import.h"

namespace pacset {

// The scikit-learn exporter: $PACSET_SKLEARN_EXPORTER, else the first readable
// of: next to the running binary (installed: /usr/bin; build tree:
// build/tools), the data dir, the source tree (builds only); empty if none.
// python3: $PACSET_PYTHON, else /usr/bin/python3 (Debian's python3-sklearn
// lives there; a python3 earlier on PATH, pyenv or venv, usually lacks it),
// else python3 from PATH.
HelperPrograms FindHelperPrograms();

}  // namespace pacset
