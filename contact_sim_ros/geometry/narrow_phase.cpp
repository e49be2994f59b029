// The narrow phase of ContactQuery.update (contact_query.py) in one call from Python: the broad phase's sweep,
// coal's collision tests of its candidate pairs and of the unbounded pairs whose bound passed, and the colliding
// pairs' contacts and contact patches read into numpy buffers. The same Pinocchio / coal calls, in the same
// order, as the Python loop it replaces (ContactQuery._narrow_phase_python, the reference: kernel="numpy"); what
// it saves is the ~40 Boost.Python calls per colliding pair (getContact, normal, the patch's points one by one).
//
// The same narrow phase is also a plain C function on raw buffers (extern "C" below; c_functions() gives its
// address, NarrowPhase.handle() the object's), which compiled numba code calls without Python in between
// (geometry/contact_pass_kernels.py): it first updates the geometry placements from the Pinocchio Data given to
// bind() (pin.updateGeometryPlacements, as ContactQuery.update), then runs run()'s calls.
//
// Built by contact_sim_ros/native_build.py (g++ against the headers and libraries of the
// pinocchio and coal wheels, at set-up: python -m contact_sim_ros.jit). Lengths in m, placements world frame.
#include <Python.h>

#include <boost/python.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <pinocchio/geometry.hpp>
#include <pinocchio/algorithm/geometry.hpp>
#include <pinocchio/multibody.hpp>
#include <pinocchio/collision/collision.hpp>
#include <pinocchio/collision/broadphase.hpp>
#include <pinocchio/collision/broadphase-callbacks.hpp>
#include <pinocchio/collision/broadphase-manager.hpp>
#include <coal/broadphase/broadphase_SSaP.h>

namespace bp = boost::python;
using BroadPhase = pinocchio::BroadPhaseManagerTpl<coal::SSaPCollisionManager>;

namespace {

// The data pointer of a C-contiguous numpy array of `itemsize`-byte items with at least `count` items.
template <typename T>
T* buffer_of(const bp::object& array, std::size_t count, const char* name) {
  Py_buffer view;
  if (PyObject_GetBuffer(array.ptr(), &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) != 0) {
    bp::throw_error_already_set();
  }
  const bool ok = view.itemsize == static_cast<Py_ssize_t>(sizeof(T)) &&
                  view.len >= static_cast<Py_ssize_t>(count * sizeof(T));
  T* data = static_cast<T*>(view.buf);
  PyBuffer_Release(&view);
  if (!ok) {
    throw std::invalid_argument(std::string("narrow_phase: buffer ") + name + " has the wrong item size or is too short");
  }
  return data;
}

// The geometries of at least one pair active in a GeometryData (the pairs the broad phase can report): the broad
// phase's objects. A geometry all of whose pairs are inactive (the contact query's compiled sphere pairs, the
// unbounded pairs it tests itself) can never give a candidate, yet in the broad phase it is placed, sorted and
// swept every step (clutter: 45 objects instead of 24).
struct GeometriesOfActivePairs final : pinocchio::GeometryObjectFilterBase {
  GeometriesOfActivePairs(const pinocchio::GeometryModel& gm, const pinocchio::GeometryData& gd)
      : first_(gm.geometryObjects.empty() ? nullptr : &gm.geometryObjects[0]), selected_(gm.geometryObjects.size(), 0) {
    for (std::size_t k = 0; k < gm.collisionPairs.size(); ++k) {
      if (!gd.activeCollisionPairs[k]) continue;
      selected_[gm.collisionPairs[k].first] = 1;
      selected_[gm.collisionPairs[k].second] = 1;
    }
  }
  bool operator()(const pinocchio::GeometryObject& object) const {
    return selected_[static_cast<std::size_t>(&object - first_)] != 0;
  }
  const pinocchio::GeometryObject* first_;
  std::vector<std::uint8_t> selected_;
};

void put3(double* row, const coal::Vec3s& v) {
  row[0] = v[0];
  row[1] = v[1];
  row[2] = v[2];
}

}  // namespace

class NarrowPhase {
 public:
  // gd: the GeometryData of the broad phase (its candidate pairs); gd_always (or None): the one of the unbounded
  // pairs (`always`: pair index of each, int64); flipped / point_pair: uint8 per pair (stored swapped; a pair with a
  // sphere: no patch); buffers: a dict of the output arrays (see run()); placement (G, 4, 4): where the patch
  // geometries' world placements are written.
  NarrowPhase(bp::object gm, bp::object gd, bp::object gd_always, bp::object broad, bp::object collect,
              bp::object always, bp::object flipped, bp::object point_pair, double margin, int max_points,
              bp::dict buffers, bp::object placement)
      : keep_(bp::make_tuple(gm, gd, gd_always, broad, collect, buffers, placement)),
        gm_(bp::extract<pinocchio::GeometryModel&>(gm)),
        gd_(bp::extract<pinocchio::GeometryData&>(gd)),
        gd_always_(gd_always.is_none() ? nullptr : &bp::extract<pinocchio::GeometryData&>(gd_always)()),
        broad_(bp::extract<BroadPhase&>(broad)),
        collect_(bp::extract<pinocchio::CollisionCallBackCollect&>(collect)),
        margin_(margin),
        max_points_(static_cast<std::size_t>(max_points)) {
    const std::size_t P = gm_.collisionPairs.size();
    const std::size_t n_always = static_cast<std::size_t>(bp::len(always));
    const std::int64_t* a = n_always ? buffer_of<std::int64_t>(always, n_always, "always") : nullptr;
    always_.assign(a, a + n_always);
    const std::uint8_t* f = buffer_of<std::uint8_t>(flipped, P, "flipped");
    const std::uint8_t* s = buffer_of<std::uint8_t>(point_pair, P, "point_pair");
    flipped_.assign(f, f + P);
    point_pair_.assign(s, s + P);
    const std::size_t rows = P * max_points_;
    single_pair_ = buffer_of<std::int64_t>(buffers["single_pair"], P, "single_pair");
    single_a_ = buffer_of<double>(buffers["single_a"], 3 * P, "single_a");
    single_b_ = buffer_of<double>(buffers["single_b"], 3 * P, "single_b");
    single_n_ = buffer_of<double>(buffers["single_n"], 3 * P, "single_n");
    multi_pair_ = buffer_of<std::int64_t>(buffers["multi_pair"], P, "multi_pair");
    multi_start_ = buffer_of<std::int64_t>(buffers["multi_start"], P + 1, "multi_start");
    multi_mid_ = buffer_of<double>(buffers["multi_mid"], 3 * rows, "multi_mid");
    multi_n_ = buffer_of<double>(buffers["multi_n"], 3 * P, "multi_n");
    multi_a_ = buffer_of<double>(buffers["multi_a"], 3 * P, "multi_a");
    multi_b_ = buffer_of<double>(buffers["multi_b"], 3 * P, "multi_b");
    multi_depth_ = buffer_of<double>(buffers["multi_depth"], P, "multi_depth");
    placement_ = buffer_of<double>(placement, 16 * gm_.geometryObjects.size(), "placement");
    // the broad phase over the geometries of gd's active pairs only (GeometriesOfActivePairs): the same candidate
    // pairs as `broad` (a pair is reported when both its geometries' inflated AABBs overlap; the others' objects
    // never give one), on fewer objects. Its first update computes the objects' AABB inflations, constant while
    // the pairs' requests and activity are (the query sets them once): later steps only place the objects
    // (update_broad_phase).
    own_broad_.reset(new BroadPhase(&broad_.getModel(), &gm_, &gd_, GeometriesOfActivePairs(gm_, gd_)));
    own_collect_.reset(new pinocchio::CollisionCallBackCollect(gm_, gd_, static_cast<int>(std::max<std::size_t>(P, 1))));
    own_broad_->update(false);
    const std::vector<bool>& status = own_broad_->getCollisionObjectStatus();
    light_update_ = std::all_of(status.begin(), status.end(), [](bool active) { return active; });
    inflation_ = own_broad_->getCollisionObjectInflation();
    colliding_.reserve(P);
    patch_points_.reserve(64);
    dist_.reserve(64);
    geometry_written_.assign(gm_.geometryObjects.size(), 0);
  }

  // One step's narrow phase. within: int64 indexes into `always` of the unbounded pairs to test (those whose
  // bound passed), n_within of them. The broad phase's placements (gd) and gd_always's must be up to date.
  // Writes the one-point contacts (single_pair, single_a/b: coal's witness points on A and B, single_n: normal
  // from A to B) and the multi-point patches (multi_pair, multi_start: first point row of each and one past the
  // last, multi_mid: the patch points, multi_n, multi_a/b, multi_depth: coal's depth), in pair order, and the
  // patch geometries' placements. Returns (singles, patches, colliding pairs within the margin, broad-phase
  // candidates).
  bp::tuple run(bp::object within, int n_within) {
    const std::int64_t* w = (gd_always_ != nullptr && n_within > 0)
                                ? buffer_of<std::int64_t>(within, static_cast<std::size_t>(n_within), "within")
                                : nullptr;
    std::int64_t counts[4];
    core(w, n_within, counts);
    return bp::make_tuple(counts[0], counts[1], counts[2], counts[3]);
  }

  // The Pinocchio model and data whose kinematics the C entry point's geometry placements are computed from (the
  // ones ContactQuery.update is given); kept alive while this object lives.
  void bind(bp::object model, bp::object data) {
    bound_ = bp::make_tuple(model, data);
    model_ = &bp::extract<pinocchio::Model&>(model)();
    data_ = &bp::extract<pinocchio::Data&>(data)();
  }

  // this object's address, the handle the C entry point takes (valid while the Python object lives)
  std::uintptr_t handle() const { return reinterpret_cast<std::uintptr_t>(this); }

  // The C entry point's step: when `placements`, pin.updateGeometryPlacements of gd (and gd_always when there are
  // unbounded pairs) from the bound Data; then run(). counts: (singles, patches, colliding pairs, broad-phase
  // candidates). Returns 0, or -1 when placements are asked for and no Data is bound.
  std::int64_t run_raw(const std::int64_t* within, std::int64_t n_within, std::int64_t* counts, bool placements) {
    if (placements && model_ == nullptr) return -1;
    if (placements) pinocchio::updateGeometryPlacements(*model_, *data_, gm_, gd_);
    if (placements && gd_always_ != nullptr && !always_.empty()) {
      pinocchio::updateGeometryPlacements(*model_, *data_, gm_, *gd_always_);
    }
    core(within, static_cast<int>(n_within), counts);
    return 0;
  }

 private:
  void core(const std::int64_t* w, int n_within, std::int64_t* counts) {
    colliding_.clear();
    if (gd_always_ != nullptr && n_within > 0) {
      for (int i = 0; i < n_within; ++i) {
        const std::size_t k = static_cast<std::size_t>(always_[static_cast<std::size_t>(w[i])]);
        if (pinocchio::computeCollision(gm_, *gd_always_, k)) colliding_.push_back(k);
      }
    }
    update_broad_phase();
    pinocchio::computeCollisions(*own_broad_, own_collect_.get());
    const std::vector<std::size_t>& candidates = own_collect_->pair_indexes;
    for (const std::size_t k : candidates) {
      if (pinocchio::computeCollision(gm_, gd_, k)) colliding_.push_back(k);
    }
    std::sort(colliding_.begin(), colliding_.end());

    std::size_t n_single = 0, n_multi = 0, n_colliding = 0, n_points = 0;
    multi_start_[0] = 0;
    for (const std::size_t k : colliding_) {
      pinocchio::GeometryData& data = (gd_always_ != nullptr && is_always(k)) ? *gd_always_ : gd_;
      const coal::Contact& contact = data.collisionResults[k].getContact(0);
      const double depth = contact.penetration_depth;
      if (depth > margin_) continue;
      ++n_colliding;
      const bool flip = flipped_[k] != 0;
      const coal::Vec3s normal = flip ? coal::Vec3s(-contact.normal) : contact.normal;
      std::size_t m = 1;
      const coal::ContactPatch* patch = nullptr;
      if (!point_pair_[k]) {
        pinocchio::computeContactPatch(gm_, data, k);
        const coal::ContactPatchResult& patches = data.contactPatchResults[k];
        patch = patches.numContactPatches() ? &patches.getContactPatch(0) : nullptr;
        m = patch != nullptr ? patch->size() : 0;
      }
      const coal::Vec3s& w1 = contact.nearest_points[0];
      const coal::Vec3s& w2 = contact.nearest_points[1];
      const coal::Vec3s& w_a = flip ? w2 : w1;
      const coal::Vec3s& w_b = flip ? w1 : w2;
      if (m > 1) {
        double* mid = multi_mid_ + 3 * n_points;
        if (m > max_points_) {
          spread_subset(*patch, m, 0.5 * (w_a + w_b), mid);
          m = max_points_;
        } else {
          for (std::size_t i = 0; i < m; ++i) put3(mid + 3 * i, patch->getPoint(i));
        }
        n_points += m;
        multi_pair_[n_multi] = static_cast<std::int64_t>(k);
        multi_start_[n_multi + 1] = static_cast<std::int64_t>(n_points);
        put3(multi_n_ + 3 * n_multi, normal);
        put3(multi_a_ + 3 * n_multi, w_a);
        put3(multi_b_ + 3 * n_multi, w_b);
        multi_depth_[n_multi] = depth;
        ++n_multi;
        const pinocchio::CollisionPair& pair = gm_.collisionPairs[k];
        write_placement(pair.first);
        write_placement(pair.second);
      } else {
        single_pair_[n_single] = static_cast<std::int64_t>(k);
        put3(single_a_ + 3 * n_single, w_a);
        put3(single_b_ + 3 * n_single, w_b);
        put3(single_n_ + 3 * n_single, normal);
        ++n_single;
      }
    }
    std::fill(geometry_written_.begin(), geometry_written_.end(), 0);
    counts[0] = static_cast<std::int64_t>(n_single);
    counts[1] = static_cast<std::int64_t>(n_multi);
    counts[2] = static_cast<std::int64_t>(n_colliding);
    counts[3] = static_cast<std::int64_t>(candidates.size());
  }

  // own_broad_->update(false) without what cannot change between steps: pinocchio's update recomputes every
  // object's AABB inflation over ALL the model's pairs (clutter: 980) and checks each object's activity; with
  // every object active after the first update (light_update_), only its placement, AABB and inflation (the same
  // calls, in the same order, as pinocchio's) and the sweep's update remain.
  void update_broad_phase() {
    if (!light_update_) {
      own_broad_->update(false);
      return;
    }
    std::vector<pinocchio::CollisionObject>& objects = own_broad_->getCollisionObjects();
    for (std::size_t k = 0; k < objects.size(); ++k) {
      pinocchio::CollisionObject& object = objects[k];
      object.setTransform(pinocchio::toCoalTransform3s(gd_.oMg[object.geometryObjectIndex]));
      object.computeAABB();
      object.getAABB().expand(inflation_[static_cast<Eigen::Index>(k)]);
    }
    own_broad_->getManager().update();
  }

  bool is_always(std::size_t k) const { return std::binary_search(always_.begin(), always_.end(), std::int64_t(k)); }

  // The world placement (4x4 homogeneous, row-major) of geometry g, from gd's oMg, once per step.
  void write_placement(std::size_t g) {
    if (geometry_written_[g]) return;
    geometry_written_[g] = 1;
    const pinocchio::SE3& M = gd_.oMg[g];
    double* H = placement_ + 16 * g;
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) H[4 * r + c] = M.rotation()(r, c);
      H[4 * r + 3] = M.translation()[r];
    }
    H[12] = H[13] = H[14] = 0.0;
    H[15] = 1.0;
  }

  // contact_query._spread_subset: max_points of the patch's m points spread over it, the point nearest `start`
  // (coal's deepest point) first, then repeatedly the one farthest from those chosen (the same arithmetic).
  void spread_subset(const coal::ContactPatch& patch, std::size_t m, const coal::Vec3s& start, double* out) {
    patch_points_.resize(m);
    dist_.resize(m);
    for (std::size_t i = 0; i < m; ++i) patch_points_[i] = patch.getPoint(i);
    auto sq = [](const coal::Vec3s& p, const coal::Vec3s& q) {
      const double d0 = p[0] - q[0], d1 = p[1] - q[1], d2 = p[2] - q[2];
      return d0 * d0 + d1 * d1 + d2 * d2;
    };
    std::size_t j = 0;
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < m; ++i) {
      const double d = sq(patch_points_[i], start);
      if (d < best) best = d, j = i;
    }
    put3(out, patch_points_[j]);
    for (std::size_t i = 0; i < m; ++i) dist_[i] = sq(patch_points_[i], patch_points_[j]);
    for (std::size_t c = 1; c < max_points_; ++c) {
      j = 0;
      best = -std::numeric_limits<double>::infinity();
      for (std::size_t i = 0; i < m; ++i) {
        if (dist_[i] > best) best = dist_[i], j = i;
      }
      put3(out + 3 * c, patch_points_[j]);
      for (std::size_t i = 0; i < m; ++i) dist_[i] = std::min(dist_[i], sq(patch_points_[i], patch_points_[j]));
    }
  }

  bp::tuple keep_;  // the Python objects whose C++ parts are referenced below, kept alive
  bp::object bound_;  // bind()'s model and data, kept alive
  const pinocchio::Model* model_ = nullptr;
  const pinocchio::Data* data_ = nullptr;
  pinocchio::GeometryModel& gm_;
  pinocchio::GeometryData& gd_;
  pinocchio::GeometryData* gd_always_;
  BroadPhase& broad_;
  pinocchio::CollisionCallBackCollect& collect_;
  std::unique_ptr<BroadPhase> own_broad_;  // the broad phase of the active pairs' geometries (constructor)
  std::unique_ptr<pinocchio::CollisionCallBackCollect> own_collect_;
  bool light_update_ = false;
  Eigen::VectorXd inflation_;
  double margin_;
  std::size_t max_points_;
  std::vector<std::int64_t> always_;
  std::vector<std::uint8_t> flipped_, point_pair_, geometry_written_;
  std::vector<std::size_t> colliding_;
  std::vector<coal::Vec3s> patch_points_;
  std::vector<double> dist_;
  std::int64_t *single_pair_, *multi_pair_, *multi_start_;
  double *single_a_, *single_b_, *single_n_, *multi_mid_, *multi_n_, *multi_a_, *multi_b_, *multi_depth_;
  double* placement_;
};

// The C entry point (numba calls it by address): NarrowPhase::run_raw of the object at `handle` (its handle()).
// within: int64 indexes into the unbounded pairs to test, n_within of them; counts: int64 (4,) out; placements:
// nonzero to first update the geometry placements from the bound Data. Returns 0, or -1 (no Data bound, or an
// exception in coal or Pinocchio: the rows are then not valid).
extern "C" {
std::int64_t contact_sim_narrow_phase(std::uintptr_t handle, const std::int64_t* within, std::int64_t n_within,
                                      std::int64_t* counts, std::int64_t placements) {
  try {
    return reinterpret_cast<NarrowPhase*>(handle)->run_raw(within, n_within, counts, placements != 0);
  } catch (...) {
    return -1;
  }
}
}

// (narrow_phase,): the C entry point's address
bp::tuple c_functions() { return bp::make_tuple(reinterpret_cast<std::uintptr_t>(&contact_sim_narrow_phase)); }

BOOST_PYTHON_MODULE(_narrow_phase) {
  bp::class_<NarrowPhase, boost::noncopyable>(
      "NarrowPhase",
      bp::init<bp::object, bp::object, bp::object, bp::object, bp::object, bp::object, bp::object, bp::object, double,
               int, bp::dict, bp::object>())
      .def("run", &NarrowPhase::run)
      .def("bind", &NarrowPhase::bind)
      .def("handle", &NarrowPhase::handle);
  bp::def("c_functions", &c_functions);
}
