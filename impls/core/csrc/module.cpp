// An empty Python module: importing impls.core._C runs the TORCH_LIBRARY initializers of this library.
#include <Python.h>

extern "C" {
PyMODINIT_FUNC PyInit__C(void) {
  static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_C", "dlrmbench native ops", -1, nullptr};
  return PyModule_Create(&def);
}
}
