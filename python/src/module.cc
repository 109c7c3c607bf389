// pacset._core: the thin pybind11 layer over the C++ library.
//
// Everything here converts between Python and the library and nothing more:
// numpy arrays are read in place through the buffer protocol (ArrayView,
// MatrixView), results are written straight into new numpy arrays, the GIL
// is released around every call that walks a forest or packs one, and a
// Status becomes a Python exception carrying its message (kInvalidArgument,
// kNotSupported and kCorruption: ValueError; kNotFound: FileNotFoundError; kIOError:
// OSError; the rest: pacset.PacsetError). The public API (pacset/__init__.py)
// adds the Python-side conveniences: pandas, input checks, output shapes.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/matrix_predict.h"
#include "layout/pac_file.h"
#include "layout/pack.h"
#include "model/array_import.h"
#include "model/import.h"
#include "tools/helper_programs.h"
#include "util/atomic_file.h"
#include "util/file_io.h"
#include "util/size.h"

namespace py = pybind11;

namespace pacset {
namespace {

py::object& PacsetError() {
  static py::object* error = nullptr;
  if (error == nullptr) error = new py::object();  // set in the module init; never freed
  return *error;
}

[[noreturn]] void Raise(const Status& s) {
  PyObject* type = PacsetError().ptr();
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotSupported:
    case StatusCode::kCorruption:
      type = PyExc_ValueError;
      break;
    case StatusCode::kNotFound:
      type = PyExc_FileNotFoundError;
      break;
    case StatusCode::kIOError:
      type = PyExc_OSError;
      break;
    default:
      break;
  }
  PyErr_SetString(type, s.message().c_str());
  throw py::error_already_set();
}

void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

template <typename T>
T Take(StatusOr<T>&& v) {
  if (!v.ok()) Raise(v.status());
  return std::move(v).value();
}

// ---- numpy -> views ----

std::string DtypeName(const py::dtype& dt) {
  return py::str(static_cast<const py::handle&>(dt)).cast<std::string>();
}

ElementType ElementTypeOf(const py::array& a, const std::string& what) {
  const py::dtype dt = a.dtype();
  const char kind = dt.kind();
  const size_t size = static_cast<size_t>(dt.itemsize());
  if (kind == 'b') return ElementType::kBool;
  if (kind == 'f' && size == 4) return ElementType::kFloat32;
  if (kind == 'f' && size == 8) return ElementType::kFloat64;
  if (kind == 'i' || kind == 'u') {
    const bool s = kind == 'i';
    switch (size) {
      case 1:
        return s ? ElementType::kInt8 : ElementType::kUint8;
      case 2:
        return s ? ElementType::kInt16 : ElementType::kUint16;
      case 4:
        return s ? ElementType::kInt32 : ElementType::kUint32;
      case 8:
        return s ? ElementType::kInt64 : ElementType::kUint64;
    }
  }
  throw py::value_error(what + ": dtype " + DtypeName(dt) +
                        " is not an integer, bool, float32 or float64 array");
}

// A 1-D numpy array (held by the caller while the view is used).
ArrayView View1D(const py::handle& obj, const std::string& what) {
  if (obj.is_none()) return ArrayView{};
  if (!py::isinstance<py::array>(obj)) throw py::value_error(what + ": expected a numpy array");
  const auto a = py::reinterpret_borrow<py::array>(obj);
  if (a.ndim() != 1)
    throw py::value_error(what + ": expected a 1-D array, found " + std::to_string(a.ndim()) +
                          " dimensions");
  ArrayView v;
  v.type = ElementTypeOf(a, what);
  v.data = a.data();
  v.size = static_cast<size_t>(a.shape(0));
  v.stride = a.strides(0);
  return v;
}

// The input rows: a 2-D float32 or float64 array (pacset/__init__.py converts
// everything else or refuses it).
MatrixView Matrix(const py::array& x) {
  if (x.ndim() != 2)
    throw py::value_error("expected a 2-D array of rows, found " + std::to_string(x.ndim()) +
                          " dimensions");
  const py::dtype dt = x.dtype();
  if (dt.kind() != 'f' || (dt.itemsize() != 4 && dt.itemsize() != 8))
    throw py::value_error("expected float32 or float64 values, found " + DtypeName(dt));
  MatrixView m;
  m.data = static_cast<const char*>(x.data());
  m.rows = static_cast<size_t>(x.shape(0));
  m.cols = static_cast<size_t>(x.shape(1));
  m.row_stride = x.strides(0);
  m.col_stride = x.strides(1);
  m.float32 = dt.itemsize() == 4;
  return m;
}

// ---- the Forest object ----

struct PyForest {
  std::unique_ptr<PacEngine> engine;
  std::string path;  // the mapped file; "" in memory
  // Seconds spent building it (import/build, layout, encode); empty when opened.
  std::vector<std::pair<std::string, double>> build_seconds;

  const PacFile& file() const { return engine->file(); }
};

std::shared_ptr<PyForest> Wrap(std::unique_ptr<PacFile> file, const EngineOptions& options,
                               std::string path) {
  auto f = std::make_shared<PyForest>();
  f->engine = Take(PacEngine::FromFile(std::move(file), options));
  f->path = std::move(path);
  return f;
}

PackOptions ToPackOptions(const py::dict& o) {
  PackOptions p;
  if (o.contains("layout")) p.layout = Take(ParseLayoutKind(o["layout"].cast<std::string>()));
  if (o.contains("block_size")) p.block_size = o["block_size"].cast<uint32_t>();
  if (o.contains("bin_depth")) p.bin_depth = o["bin_depth"].cast<uint32_t>();
  if (o.contains("trees_per_bin")) p.trees_per_bin = o["trees_per_bin"].cast<uint32_t>();
  if (o.contains("leaf_ids")) p.leaf_ids = o["leaf_ids"].cast<bool>();
  Check(ValidatePackOptions(p));
  return p;
}

// Packs in memory (no GIL) and opens the result.
std::shared_ptr<PyForest> PackAndOpen(StatusOr<Forest> (*build)(void*), void* arg,
                                      const PackOptions& options, const std::string& name) {
  StatusOr<std::unique_ptr<PacFile>> file = Status::Internal("not packed");
  PackReport report;
  double build_seconds = 0;
  {
    py::gil_scoped_release nogil;
    const auto t0 = std::chrono::steady_clock::now();
    StatusOr<Forest> forest = build(arg);
    build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!forest.ok()) {
      file = forest.status();
    } else {
      StatusOr<std::string> bytes = PackForestToBuffer(*forest, options, &report);
      forest = Status::Internal("released");  // free the Forest before opening the packed copy
      if (!bytes.ok()) {
        file = bytes.status();
      } else {
        file = PacFile::FromBuffer(std::move(bytes).value(), name);
      }
    }
  }
  auto f = Wrap(Take(std::move(file)), EngineOptions{}, "");
  f->build_seconds = {{"build", build_seconds},
                      {"layout", report.layout_seconds},
                      {"encode", report.encode_seconds}};
  return f;
}

template <typename Fn>
std::shared_ptr<PyForest> BuildAndPack(Fn fn, const py::dict& pack, const std::string& name) {
  const PackOptions options = ToPackOptions(pack);
  return PackAndOpen([](void* f) { return (*static_cast<Fn*>(f))(); }, &fn, options, name);
}

// ---- module functions ----

// The first `n` bytes (fewer if the file is shorter) of the model or .pac
// file at `path`, to tell which it is. Like every C++ opener it refuses a
// path that is not a regular file (OpenRegularFile): a FIFO would block.
py::bytes ReadHead(const std::string& path, size_t n) {
  std::string head(n, '\0');
  Status s;
  {
    py::gil_scoped_release nogil;
    auto fd = OpenRegularFile(path);
    StatusOr<size_t> got =
        fd.ok() ? PreadUpTo(fd->get(), head.data(), n, 0, path) : StatusOr<size_t>(fd.status());
    if (got.ok()) head.resize(*got);
    s = got.status();
  }
  Check(s);
  return py::bytes(head);
}

std::shared_ptr<PyForest> Open(const std::string& path, bool verify_blocks, uint32_t max_in_flight,
                               bool sequential_reads, const std::string& isa) {
  static const std::pair<const char*, WarmIsa> kIsas[] = {{"auto", WarmIsa::kAuto},
                                                          {"scalar", WarmIsa::kScalar},
                                                          {"avx2", WarmIsa::kAvx2},
                                                          {"avx512", WarmIsa::kAvx512}};
  const auto* named = std::find_if(std::begin(kIsas), std::end(kIsas),
                                   [&](const auto& k) { return isa == k.first; });
  if (named == std::end(kIsas))
    throw py::value_error("isa must be auto, scalar, avx2 or avx512, not '" + isa + "'");
  StatusOr<std::unique_ptr<PacFile>> file = Status::Internal("not opened");
  {
    py::gil_scoped_release nogil;
    file = PacFile::Open(path);
  }
  EngineOptions options;
  options.verify_blocks = verify_blocks;
  options.max_in_flight = max_in_flight;  // 0: the source's default
  options.sequential_reads = sequential_reads;
  options.warm_isa = named->second;
  return Wrap(Take(std::move(file)), options, path);
}

// A .pac file's bytes held by a Python object that exports the buffer
// protocol (bytes, bytearray, memoryview, numpy): read in place, no copy.
std::shared_ptr<PyForest> FromBuffer(const py::object& obj, const std::string& name) {
  auto* view = new Py_buffer;
  if (PyObject_GetBuffer(obj.ptr(), view, PyBUF_SIMPLE) != 0) {
    delete view;
    throw py::error_already_set();
  }
  std::shared_ptr<const void> keep(view, [](const void* p) {
    py::gil_scoped_acquire gil;
    auto* v = static_cast<Py_buffer*>(const_cast<void*>(p));
    PyBuffer_Release(v);
    delete v;
  });
  auto file = PacFile::FromMemory(static_cast<const char*>(view->buf),
                                  static_cast<uint64_t>(view->len), keep, name);
  return Wrap(Take(std::move(file)), EngineOptions{}, "");
}

std::shared_ptr<PyForest> LoadFile(const std::string& path, const std::string& format,
                                   const py::dict& pack) {
  const ModelFormat f = Take(ParseModelFormat(format));
  return BuildAndPack([&] { return ImportModel(path, f, FindHelperPrograms()); }, pack, path);
}

std::shared_ptr<PyForest> LoadXgboost(const py::bytes& raw, bool ubjson, const std::string& name,
                                      const py::dict& pack) {
  const std::string_view bytes = raw;  // held by `raw` while we pack
  return BuildAndPack(
      [&] { return ubjson ? ImportXgboostUbjson(bytes, name) : ImportXgboostJson(bytes, name); },
      pack, name);
}

std::shared_ptr<PyForest> LoadSklearn(const py::dict& doc, const py::list& trees,
                                      const std::string& name, const py::dict& pack) {
  SklearnEstimatorArrays est;
  est.estimator = doc["estimator"].cast<std::string>();
  est.sklearn_version = doc["sklearn_version"].cast<std::string>();
  est.n_features = doc["n_features"].cast<int64_t>();
  est.n_classes = doc["n_classes"].cast<int64_t>();
  if (doc.contains("loss")) {
    est.loss = doc["loss"].cast<std::string>();
    est.learning_rate = doc["learning_rate"].cast<double>();
    est.init_raw_prediction = doc["init_raw_prediction"].cast<std::vector<double>>();
  }
  if (doc.contains("bitset_words")) {  // HistGradientBoosting
    est.bitset_words = doc["bitset_words"].cast<uint32_t>();
    est.categorical_features = doc["categorical_features"].cast<std::vector<int64_t>>();
    est.known_category_bitsets = doc["known_category_bitsets"].cast<std::vector<uint32_t>>();
  }
  if (doc.contains("score_denominator")) {  // IsolationForest
    est.score_denominator = doc["score_denominator"].cast<double>();
    est.offset = doc["offset"].cast<double>();
  }
  for (size_t t = 0; t < trees.size(); ++t) {
    const py::dict tree = trees[t].cast<py::dict>();
    const std::string at = "trees/" + std::to_string(t) + "/";
    SklearnTreeArrays a;
    a.output = tree.contains("output") ? tree["output"].cast<uint32_t>() : 0;
    a.children_left = View1D(tree["children_left"], at + "children_left");
    a.children_right = View1D(tree["children_right"], at + "children_right");
    a.feature = View1D(tree["feature"], at + "feature");
    a.threshold = View1D(tree["threshold"], at + "threshold");
    a.value = View1D(tree["value"], at + "value");
    a.n_node_samples = View1D(tree["n_node_samples"], at + "n_node_samples");
    if (tree.contains("missing_go_to_left"))
      a.missing_go_to_left = View1D(tree["missing_go_to_left"], at + "missing_go_to_left");
    if (tree.contains("is_leaf")) {  // HistGradientBoosting
      a.is_leaf = View1D(tree["is_leaf"], at + "is_leaf");
      a.is_categorical = View1D(tree["is_categorical"], at + "is_categorical");
      a.bitset_idx = View1D(tree["bitset_idx"], at + "bitset_idx");
      a.left_cat_bitsets = View1D(tree["left_cat_bitsets"], at + "left_cat_bitsets");
    }
    est.trees.push_back(a);
  }
  return BuildAndPack(
      [&]() -> StatusOr<Forest> {
        auto forest = ImportSklearnArrays(est, name);
        if (forest.ok()) forest->source.format = "sklearn-object";
        return forest;
      },
      pack, name);
}

template <typename E>
E ParseName(const std::string& what, const std::string& value, const char* (*name_of)(E), int n) {
  std::string known;
  for (int i = 0; i < n; ++i) {
    if (value == name_of(static_cast<E>(i))) return static_cast<E>(i);
    known += (i ? ", " : "") + std::string(name_of(static_cast<E>(i)));
  }
  throw py::value_error(what + " '" + value + "' is not one of " + known);
}

uint64_t ParseSize(const std::string& text, const std::string& what) {
  auto bytes = ParseByteSize(text, what);
  if (!bytes.ok()) throw py::value_error(bytes.status().message());
  return *bytes;
}

const char* PrecisionName(Precision p) { return p == Precision::kFloat32 ? "float32" : "float64"; }

std::shared_ptr<PyForest> FromArrays(const py::dict& spec_d, const py::list& trees,
                                     const py::dict& pack) {
  FlatForestSpec spec;
  spec.num_features = spec_d["num_features"].cast<uint32_t>();
  spec.num_outputs = spec_d["num_outputs"].cast<uint32_t>();
  spec.num_classes = spec_d["num_classes"].cast<uint32_t>();
  spec.leaf_width = spec_d["leaf_width"].cast<uint32_t>();
  spec.task = ParseName<Task>("task", spec_d["task"].cast<std::string>(), TaskName, 3);
  spec.postprocess = ParseName<Postprocess>(
      "postprocess", spec_d["postprocess"].cast<std::string>(), PostprocessName, 6);
  spec.sigmoid_alpha = spec_d["sigmoid_alpha"].cast<double>();
  spec.aggregation = ParseName<Aggregation>(
      "aggregation", spec_d["aggregation"].cast<std::string>(), AggregationName, 2);
  spec.base_score = spec_d["base_score"].cast<std::vector<double>>();
  spec.input_precision = ParseName<Precision>(
      "input_precision", spec_d["input_precision"].cast<std::string>(), PrecisionName, 2);
  spec.accumulate_precision = ParseName<Precision>(
      "accumulate_precision", spec_d["accumulate_precision"].cast<std::string>(), PrecisionName, 2);
  const std::string decision = spec_d["decision"].cast<std::string>();
  if (decision != "<=" && decision != "<")
    throw py::value_error("decision must be '<=' or '<', not '" + decision + "'");
  spec.strict_less = decision == "<";
  spec.source.format = "arrays";
  spec.source.objective = spec_d["objective"].cast<std::string>();
  for (size_t t = 0; t < trees.size(); ++t) {
    const py::dict tree = trees[t].cast<py::dict>();
    const std::string at = "trees/" + std::to_string(t) + "/";
    auto get = [&](const char* key) -> ArrayView {
      return tree.contains(key) ? View1D(tree[key], at + key) : ArrayView{};
    };
    FlatTreeArrays a;
    a.left_child = get("left_child");
    a.right_child = get("right_child");
    a.feature = get("feature");
    a.threshold = get("threshold");
    a.default_left = get("default_left");
    a.leaf_value = get("leaf_value");
    a.cardinality = get("cardinality");
    a.group = tree.contains("group") ? tree["group"].cast<uint32_t>() : 0;
    spec.trees.push_back(a);
  }
  return BuildAndPack([&] { return BuildForestFromArrays(spec, "arrays"); }, pack,
                      "<forest from arrays>");
}

// ---- Forest methods ----

void CheckWidth(const PyForest& f, const MatrixView& m) {
  if (m.cols != f.engine->num_features())
    throw py::value_error("X has " + std::to_string(m.cols) + " columns but the forest has " +
                          std::to_string(f.engine->num_features()) + " features");
}

template <typename T>
py::array PredictAs(const PyForest& f, const MatrixView& m, bool margin, int threads) {
  py::array_t<T> out({m.rows, static_cast<size_t>(f.engine->num_columns(margin))});
  T* dst = out.mutable_data();
  Status s;
  {
    py::gil_scoped_release nogil;
    s = PredictMatrix(*f.engine, m, margin, threads, dst);
  }
  Check(s);
  return std::move(out);
}

py::array Predict(const PyForest& f, const py::array& x, bool margin, int threads,
                  bool float32_out) {
  const MatrixView m = Matrix(x);
  CheckWidth(f, m);
  return float32_out ? PredictAs<float>(f, m, margin, threads)
                     : PredictAs<double>(f, m, margin, threads);
}

py::array Apply(const PyForest& f, const py::array& x, int threads) {
  const MatrixView m = Matrix(x);
  CheckWidth(f, m);
  if (!f.file().has_leaf_ids())
    Raise(Status::NotSupported("the forest was packed without leaf ids (leaf_ids=False)"));
  py::array_t<int32_t> out({m.rows, static_cast<size_t>(f.engine->num_trees())});
  int32_t* dst = out.mutable_data();
  Status s;
  {
    py::gil_scoped_release nogil;
    s = ApplyMatrix(*f.engine, m, threads, dst);
  }
  Check(s);
  return std::move(out);
}

void Save(const PyForest& f, const std::string& path) {
  Status s;
  {
    py::gil_scoped_release nogil;
    s = WriteFileAtomically(path, std::string_view(f.file().data(), f.file().size()));
  }
  Check(s);
}

py::dict Info(const PyForest& f) {
  const PacHeader& h = f.file().header();
  py::dict d;
  d["task"] = TaskName(static_cast<Task>(h.task));
  d["postprocess"] = PostprocessName(static_cast<Postprocess>(h.postprocess));
  d["aggregation"] = AggregationName(static_cast<Aggregation>(h.aggregation));
  d["num_features"] = h.num_features;
  d["num_outputs"] = h.num_outputs;
  d["num_classes"] = h.num_classes;
  d["num_trees"] = h.num_trees;
  d["num_nodes"] = h.num_nodes;
  d["max_depth"] = h.max_depth;
  d["block_size"] = h.block_size;
  d["block_count"] = h.block_count;
  d["layout"] = LayoutKindName(static_cast<LayoutKind>(h.layout));
  d["float32_outputs"] = f.engine->float32_outputs();
  d["has_leaf_ids"] = f.file().has_leaf_ids();
  const EngineStats st = f.engine->stats();
  d["warm_path_bytes"] = st.warm_forest_bytes;
  d["warm_path_build_seconds"] = st.warm_forest_build_seconds;
  d["warm_isa"] = WarmIsaName(st.warm_isa);
  d["block_io"] = st.block_io;
  d["warm_simd_rows"] = st.warm_simd_rows;
  d["source_json"] = f.file().SourceInfoJson();
  const OutputRule& rule = f.engine->output_rule();
  if (rule.postprocess == Postprocess::kIsolationScore) {
    d["isolation_denominator"] = rule.isolation_denominator;
    d["isolation_offset"] = rule.isolation_offset;
  }
  return d;
}

}  // namespace
}  // namespace pacset

PYBIND11_MODULE(_core, m) {
  using namespace pacset;
  m.doc() = "pacset's C++ core (use the pacset package, not this module)";
  PacsetError() = py::reinterpret_borrow<py::object>(
      PyErr_NewException("pacset.PacsetError", PyExc_RuntimeError, nullptr));
  m.attr("PacsetError") = PacsetError();

  py::class_<PyForest, std::shared_ptr<PyForest>>(m, "Forest", py::buffer_protocol())
      .def_buffer([](PyForest& f) {
        return py::buffer_info(const_cast<char*>(f.file().data()), 1,
                               py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(f.file().size())}, {1}, true);
      })
      .def("predict", &Predict, py::arg("x"), py::arg("margin"), py::arg("n_threads"),
           py::arg("float32_out"))
      .def("apply", &Apply, py::arg("x"), py::arg("n_threads"))
      .def("save", &Save, py::arg("path"))
      .def("info", &Info)
      .def("num_columns",
           [](const PyForest& f, bool margin) { return f.engine->num_columns(margin); })
      .def_property_readonly("path", [](const PyForest& f) { return f.path; })
      .def_property_readonly("nbytes", [](const PyForest& f) { return f.file().size(); })
      .def_property_readonly("build_seconds", [](const PyForest& f) { return f.build_seconds; })
      .def_property_readonly("mapped", [](const PyForest& f) { return f.file().mapped(); });

  // Sizes as people write them ("64KiB"), by the grammar of util/size.h.
  m.def("parse_byte_size", &ParseSize, py::arg("text"), py::arg("what"));
  m.def("read_head", &ReadHead, py::arg("path"), py::arg("n"));
  m.def("open", &Open, py::arg("path"), py::arg("verify_blocks") = true,
        py::arg("max_in_flight") = EngineOptions().max_in_flight,
        py::arg("sequential_reads") = EngineOptions().sequential_reads, py::arg("isa") = "auto");
  m.def("from_buffer", &FromBuffer, py::arg("buffer"), py::arg("name"));
  m.def("load_file", &LoadFile, py::arg("path"), py::arg("format"), py::arg("pack"));
  m.def("load_xgboost", &LoadXgboost, py::arg("raw"), py::arg("ubjson"), py::arg("name"),
        py::arg("pack"));
  m.def("load_sklearn", &LoadSklearn, py::arg("doc"), py::arg("trees"), py::arg("name"),
        py::arg("pack"));
  m.def("from_arrays", &FromArrays, py::arg("spec"), py::arg("trees"), py::arg("pack"));
}
