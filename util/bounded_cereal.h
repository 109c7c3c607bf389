// Loading cereal portable-binary archives from outside input (forest files,
// store catalog records) without trusting their length prefixes.
//
// cereal allocates a vector or string (and zero-fills it) as soon as it reads
// the length, before it finds the bytes missing: a forged length in a file of
// a few bytes cost gigabytes. Containers wrapped in Bound(...) or
// BoundMap(...) are written
// exactly as cereal writes them, and on loading their length is checked
// against the bytes left in the input first. The archive must be a
// BoundedInputArchive, which knows the input's size.
#pragma once

#include <cereal/archives/portable_binary.hpp>

#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <utility>

namespace pacset {

// A portable binary input archive that knows how many bytes its stream
// has left.
class BoundedInputArchive : public cereal::PortableBinaryInputArchive {
 public:
  // `size`: the stream's total size in bytes.
  BoundedInputArchive(std::istream& in, uint64_t size)
      : cereal::PortableBinaryInputArchive(in), in_(in), size_(size) {}

  // The version of the record being loaded, for loaders whose fields depend
  // on it (set by whoever read the record's version first).
  uint32_t record_version = 0;

  uint64_t BytesLeft() const {
    const std::streamoff at = in_.tellg();
    if (at < 0 || static_cast<uint64_t>(at) > size_) return 0;
    return size_ - static_cast<uint64_t>(at);
  }

 private:
  std::istream& in_;
  const uint64_t size_;
};

// A std::vector of arithmetic values or a std::string.
template <class Container>
struct Bounded {
  Container& c;
};

template <class Container>
Bounded<Container> Bound(Container& c) {
  return Bounded<Container>{c};
}

template <class Archive, class Container>
void CEREAL_SAVE_FUNCTION_NAME(Archive& ar, const Bounded<Container>& b) {
  ar(b.c);
}

// cereal hands nested loads the base archive type; the archive is always a
// BoundedInputArchive underneath (checked: anything else is refused).
template <class Archive, class Container>
void CEREAL_LOAD_FUNCTION_NAME(Archive& ar, Bounded<Container>& b) {
  using T = typename Container::value_type;
  const auto* bounded = dynamic_cast<const BoundedInputArchive*>(&ar);
  if (bounded == nullptr)
    throw cereal::Exception("a bounded container needs a BoundedInputArchive");
  cereal::size_type n = 0;
  ar(cereal::make_size_tag(n));
  const uint64_t left = bounded->BytesLeft();
  if (n > left / sizeof(T))
    throw cereal::Exception("an array of " + std::to_string(n) + " values in " +
                            std::to_string(left) + " remaining bytes");
  b.c.resize(static_cast<size_t>(n));
  ar(cereal::binary_data(b.c.data(), static_cast<size_t>(n) * sizeof(T)));
}

// A std::map whose entry count, string keys and values (strings, maps,
// anything with a bounded serialize) are checked the same way. Same bytes as
// cereal's map serialisation.
template <class Map>
struct BoundedMap {
  Map& m;
};

template <class Map>
BoundedMap<Map> BoundMap(Map& m) {
  return BoundedMap<Map>{m};
}

template <class Archive, class Map>
void CEREAL_SAVE_FUNCTION_NAME(Archive& ar, const BoundedMap<Map>& b) {
  ar(b.m);
}

namespace bounded_cereal_internal {

template <class Archive, class T>
void LoadItem(Archive& ar, T& v) {
  ar(v);
}
template <class Archive>
void LoadItem(Archive& ar, std::string& s) {
  Bounded<std::string> b{s};
  ar(b);
}
template <class Archive, class K, class V, class C, class A>
void LoadItem(Archive& ar, std::map<K, V, C, A>& m) {
  BoundedMap<std::map<K, V, C, A>> b{m};
  ar(b);
}

}  // namespace bounded_cereal_internal

template <class Archive, class Map>
void CEREAL_LOAD_FUNCTION_NAME(Archive& ar, BoundedMap<Map>& b) {
  const auto* bounded = dynamic_cast<const BoundedInputArchive*>(&ar);
  if (bounded == nullptr) throw cereal::Exception("a bounded map needs a BoundedInputArchive");
  cereal::size_type n = 0;
  ar(cereal::make_size_tag(n));
  // Every entry takes at least one byte (in practice eight or more).
  if (n > bounded->BytesLeft())
    throw cereal::Exception("a map of " + std::to_string(n) + " entries in " +
                            std::to_string(bounded->BytesLeft()) + " remaining bytes");
  b.m.clear();
  for (cereal::size_type i = 0; i < n; ++i) {
    typename Map::key_type key{};
    typename Map::mapped_type value{};
    bounded_cereal_internal::LoadItem(ar, key);
    bounded_cereal_internal::LoadItem(ar, value);
    b.m.emplace_hint(b.m.end(), std::move(key), std::move(value));
  }
}

}  // namespace pacset
