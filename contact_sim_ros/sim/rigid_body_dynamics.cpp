// The Pinocchio calls of one Simulator step (sim/simulator.py) in three calls from Python, into preallocated
// numpy buffers: the mass matrix, the nonlinear effects, the gravity force and the position error of the step's
// start (Simulator._advance), the configuration update q + dt v (pin.integrate), and the kinematics of the new
// state (Simulator._update_kinematics); and a force/torque sensor's reading (sim/sensors.ForceTorqueSensor) in
// one call. The same Pinocchio functions and arithmetic, with the same arguments, in the same order as the Python
// code they replace (the reference, used when this module is not built): bit-identical results. What it saves is
// the Boost.Python argument conversions and the numpy arrays and Python objects that every pin.* call makes.
// The same calls are also plain C functions on raw buffers (extern "C" below; c_functions() gives their addresses,
// RigidBodyDynamics.handle() the object's), which compiled numba code calls without Python in between: the fused
// tree step (sim/tree_step.py).
//
// Built by contact_sim_ros/native_build.py (g++ against the headers and libraries of the pinocchio wheel, at
// set-up: python -m contact_sim_ros.jit). Units: SI (kg, m, rad, N, N*m, s).
#include <Python.h>

#include <boost/python.hpp>

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <pinocchio/multibody.hpp>
#include <pinocchio/algorithm/crba.hpp>
#include <pinocchio/algorithm/frames.hpp>
#include <pinocchio/algorithm/jacobian.hpp>
#include <pinocchio/algorithm/joint-configuration.hpp>
#include <pinocchio/algorithm/kinematics.hpp>
#include <pinocchio/algorithm/rnea.hpp>

#include <vector>

namespace bp = boost::python;

namespace {

// The data pointer of a C-contiguous numpy array of T (float64 or int64) with at least `count` items
// (`writable`: an output).
template <typename T>
T* buffer_of(const bp::object& array, std::size_t count, const char* name, bool writable = true) {
  Py_buffer view;
  const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(array.ptr(), &view, flags) != 0) {
    bp::throw_error_already_set();
  }
  const char* format = view.format != nullptr ? view.format : "";
  const bool type_ok = std::is_floating_point<T>::value ? std::strcmp(format, "d") == 0
                                                        : (std::strcmp(format, "l") == 0 || std::strcmp(format, "q") == 0);
  const bool ok = type_ok && view.itemsize == static_cast<Py_ssize_t>(sizeof(T)) &&
                  view.len >= static_cast<Py_ssize_t>(count * sizeof(T));
  T* data = static_cast<T*>(view.buf);
  PyBuffer_Release(&view);
  if (!ok) {
    throw std::invalid_argument(std::string("rigid_body_dynamics: array ") + name +
                                (std::is_floating_point<T>::value ? " is not float64" : " is not int64") +
                                " or is too short");
  }
  return data;
}

// A contact's wrench about the world origin, [f, p x f] (N, N*m), with p x f as sensors.cross_rows computes it.
void contact_wrench(const double* p, const double* f, double* out) {
  out[0] = f[0];
  out[1] = f[1];
  out[2] = f[2];
  out[3] = p[1] * f[2] - p[2] * f[1];
  out[4] = p[2] * f[0] - p[0] * f[2];
  out[5] = p[0] * f[1] - p[1] * f[0];
}

using Vector = Eigen::Map<Eigen::VectorXd>;
using ConstVector = Eigen::Map<const Eigen::VectorXd>;
using RowMajorMatrix = Eigen::Map<Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

}  // namespace

// The step's Pinocchio calls on one (Model, Data) pair; the arrays are passed per call (q, v change every step),
// the mass matrix, nle and gravity buffers once (M (nv, nv), nle (nv,), gravity (nv,): reused every step).
class RigidBodyDynamics {
 public:
  RigidBodyDynamics(bp::object model, bp::object data, bp::object mass_matrix, bp::object nle, bp::object gravity)
      : keep_(bp::make_tuple(model, data, mass_matrix, nle, gravity)),
        model_(bp::extract<pinocchio::Model&>(model)),
        data_(bp::extract<pinocchio::Data&>(data)),
        nq_(static_cast<std::size_t>(model_.nq)),
        nv_(static_cast<std::size_t>(model_.nv)),
        mass_matrix_(buffer_of<double>(mass_matrix, nv_ * nv_, "mass_matrix"), nv_, nv_),
        nle_(buffer_of<double>(nle, nv_, "nle"), nv_),
        gravity_(buffer_of<double>(gravity, nv_, "gravity"), nv_),
        step_(Eigen::VectorXd::Zero(static_cast<Eigen::Index>(nv_))) {}

  // At the step's start (q, v): M = crba(q) (WORLD convention, symmetric),
  // nle(q, v), g(q) when `with_gravity`, and position_error = difference(q, q_target) into `position_error` (nv,):
  // pin.crba(model, data, q, pin.Convention.WORLD), pin.nonLinearEffects, pin.computeGeneralizedGravity and
  // pin.difference in that order.
  void dynamics(bp::object q, bp::object v, bp::object q_target, bp::object position_error, bool with_gravity) {
    dynamics_raw(buffer_of<double>(q, nq_, "q", false), buffer_of<double>(v, nv_, "v", false),
                 buffer_of<double>(q_target, nq_, "q_target", false), mass_matrix_.data(), nle_.data(),
                 gravity_.data(), buffer_of<double>(position_error, nv_, "position_error"), with_gravity);
  }

  // dynamics() on raw buffers (q, q_target (nq,), v (nv,); outputs M (nv, nv) row-major, nle, gravity, error
  // (nv,)): the C entry point tree_dynamics (a compiled caller's, sim/tree_step.py) and the method above.
  void dynamics_raw(const double* q, const double* v, const double* q_target, double* mass_matrix, double* nle,
                    double* gravity, double* position_error, bool with_gravity) {
    const ConstVector qm(q, nq_);
    const ConstVector vm(v, nv_);
    const ConstVector target(q_target, nq_);
    Vector error(position_error, nv_);
    RowMajorMatrix M(mass_matrix, nv_, nv_);
    Vector nle_out(nle, nv_), gravity_out(gravity, nv_);
    // as pin.crba (Pinocchio's binding crba_proxy): M zeroed first (crba adds a mimic joint's terms into its
    // leader's entries), then made symmetric
    data_.M.fill(0.0);
    pinocchio::crba(model_, data_, qm, pinocchio::Convention::WORLD);
    data_.M.triangularView<Eigen::StrictlyLower>() = data_.M.transpose().triangularView<Eigen::StrictlyLower>();
    M = data_.M;
    nle_out = pinocchio::nonLinearEffects(model_, data_, qm, vm);
    if (with_gravity) gravity_out = pinocchio::computeGeneralizedGravity(model_, data_, qm);
    pinocchio::difference(model_, qm, target, error);
  }

  // q_next = integrate(q, dt * v) (pin.integrate(model, q, dt * v)) into `q_next` (nq,).
  void integrate(bp::object q, bp::object v, double dt, bp::object q_next) {
    integrate_raw(buffer_of<double>(q, nq_, "q", false), buffer_of<double>(v, nv_, "v", false), dt,
                  buffer_of<double>(q_next, nq_, "q_next"));
  }

  // integrate() on raw buffers (q, q_next (nq,), v (nv,)): the C entry point tree_integrate and the method above.
  void integrate_raw(const double* q, const double* v, double dt, double* q_next) {
    const ConstVector qm(q, nq_);
    const ConstVector vm(v, nv_);
    Vector out(q_next, nq_);
    step_.noalias() = dt * vm;
    pinocchio::integrate(model_, qm, step_, out);
  }

  // The kinematics a step reads: joint placements and velocities at (q, v) (pin.forwardKinematics) and the joint
  // Jacobians of those placements (pin.computeJointJacobians(model, data)).
  void kinematics(bp::object q, bp::object v) {
    kinematics_raw(buffer_of<double>(q, nq_, "q", false), buffer_of<double>(v, nv_, "v", false));
  }

  // kinematics() on raw buffers (q (nq,), v (nv,)): the C entry point tree_kinematics and the method above.
  void kinematics_raw(const double* q, const double* v) {
    const ConstVector qm(q, nq_);
    const ConstVector vm(v, nv_);
    pinocchio::forwardKinematics(model_, data_, qm, vm);
    pinocchio::computeJointJacobians(model_, data_);
  }

  // What a compiled caller reads of the kinematics (after kinematics_raw): the joint Jacobians data.J
  // (6, nvExtended) into `jacobian` row-major, and the placements data.oMi[joints[k]] of n joints into
  // `placement` (n, 4, 4) row-major at slots[k], as oMi[j].homogeneous (R, t; last row 0 0 0 1).
  void read_kinematics(double* jacobian, double* placement, const std::int64_t* joints, const std::int64_t* slots,
                       std::int64_t n) const {
    const auto& J = data_.J;
    const Eigen::Index cols = J.cols();
    for (Eigen::Index r = 0; r < 6; ++r)
      for (Eigen::Index c = 0; c < cols; ++c) jacobian[r * cols + c] = J(r, c);
    for (std::int64_t k = 0; k < n; ++k) {
      const pinocchio::SE3& M = data_.oMi[static_cast<std::size_t>(joints[k])];
      double* H = placement + 16 * slots[k];
      for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 3; ++c) H[4 * r + c] = M.rotation()(r, c);
        H[4 * r + 3] = M.translation()[r];
      }
      H[12] = 0.0;
      H[13] = 0.0;
      H[14] = 0.0;
      H[15] = 1.0;
    }
  }

  // The world-aligned Jacobian (6, nv) of frame `frame` at the Data's current joint placements and Jacobians (after
  // kinematics_raw), as pin.getFrameJacobian(model, data, frame, LOCAL_WORLD_ALIGNED) (zeroed, then filled), into
  // `jacobian` column-major: the memory of the (nv, 6) row-major J^T (numpy's J.T of the binding's result).
  void frame_jacobian_raw(std::int64_t frame, double* jacobian) {
    Eigen::Map<Eigen::Matrix<double, 6, Eigen::Dynamic>> J(jacobian, 6, static_cast<Eigen::Index>(nv_));
    J.setZero();
    pinocchio::getFrameJacobian(model_, data_, static_cast<pinocchio::FrameIndex>(frame),
                                pinocchio::LOCAL_WORLD_ALIGNED, J);
  }

  std::size_t jacobian_columns() const { return static_cast<std::size_t>(data_.J.cols()); }

  // this object's address, the handle the C entry points take (valid while the Python object lives)
  std::uintptr_t handle() const { return reinterpret_cast<std::uintptr_t>(this); }

  // The gravity force g(q) (N*m or N) of the dofs `v_index` (int64, n of them) into `out` (n,):
  // pin.computeGeneralizedGravity(model, data, q).take(v_index, out=out) (sim/gravity_feed_forward.py).
  void joint_gravity(bp::object q, bp::object v_index, bp::object out) {
    const std::size_t n = static_cast<std::size_t>(bp::len(v_index));
    const ConstVector qm(buffer_of<double>(q, nq_, "q", false), nq_);
    const std::int64_t* index = buffer_of<std::int64_t>(v_index, n, "v_index", false);
    double* g_out = buffer_of<double>(out, n, "out");
    const Eigen::VectorXd& g = pinocchio::computeGeneralizedGravity(model_, data_, qm);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t k = index[i];
      if (k < 0 || k >= static_cast<std::int64_t>(nv_)) throw std::out_of_range("rigid_body_dynamics: v_index");
      g_out[i] = g[static_cast<Eigen::Index>(k)];
    }
  }

 private:
  bp::object keep_;  // the Python objects whose memory this holds
  pinocchio::Model& model_;
  pinocchio::Data& data_;
  std::size_t nq_, nv_;
  RowMajorMatrix mass_matrix_;
  Vector nle_, gravity_;
  Eigen::VectorXd step_;  // dt v (rad or m), the tangent step of integrate()
};


// A 6-axis force/torque sensor's reading (sim/sensors.ForceTorqueSensor.compute, whose docstring gives the
// physics): the robots' model and Data (model/robots_only.py), the sensor's joint there, the joints whose subtrees
// hang below it on the same body (child_joints, int64), whether the sensor's parent link moves with another joint
// (moving_joint), the inertia of the links merged into the sensor's joint beyond it, the sensor frame in that
// joint's frame, robot_joint (int64, per joint of the whole model: its joint in the robots' model, <= 0: none) and
// fixed_geometry (uint8 per collision geometry of the whole model: on a link merged into the sensor's joint).
class ForceTorqueReading {
 public:
  ForceTorqueReading(bp::object model, bp::object data, int joint, bp::object child_joints, bool moving_joint,
                     bp::object fixed_inertia, bp::object sensor_in_joint, bp::object robot_joint,
                     bp::object fixed_geometry)
      : keep_(bp::make_tuple(model, data)),
        model_(bp::extract<pinocchio::Model&>(model)),
        data_(bp::extract<pinocchio::Data&>(data)),
        joint_(static_cast<std::size_t>(joint)),
        moving_joint_(moving_joint),
        fixed_inertia_(bp::extract<pinocchio::Inertia>(fixed_inertia)()),
        sensor_in_joint_(bp::extract<pinocchio::SE3>(sensor_in_joint)()),
        fext_(static_cast<std::size_t>(model_.njoints), pinocchio::Force::Zero()) {
    const std::size_t nc = static_cast<std::size_t>(bp::len(child_joints));
    const std::int64_t* c = nc ? buffer_of<std::int64_t>(child_joints, nc, "child_joints", false) : nullptr;
    child_joints_.assign(c, c + nc);
    const std::size_t nj = static_cast<std::size_t>(bp::len(robot_joint));
    const std::int64_t* r = buffer_of<std::int64_t>(robot_joint, nj, "robot_joint", false);
    robot_joint_.assign(r, r + nj);
    Py_buffer view;
    if (PyObject_GetBuffer(fixed_geometry.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) bp::throw_error_already_set();
    const std::uint8_t* g = static_cast<const std::uint8_t*>(view.buf);
    fixed_geometry_.assign(g, g + view.len);
    PyBuffer_Release(&view);
    wrench_.assign(6 * nj, 0.0);
    touched_.reserve(nj);
  }

  // The reading (fx, fy, fz, tx, ty, tz; N, N*m, sensor frame) into `out` (6,) at the robots' (q, v, a) with the
  // last step's n contacts: joint_a, joint_b, geometry_a, geometry_b (int64, n), point (n, 3, m, world) and the
  // world forces on B (n, 3, N); n = 0: no contact.
  void read(bp::object q, bp::object v, bp::object a, int n_contacts, bp::object joint_a, bp::object joint_b,
            bp::object geometry_a, bp::object geometry_b, bp::object point, bp::object forces, bp::object out) {
    const std::size_t nq = static_cast<std::size_t>(model_.nq), nv = static_cast<std::size_t>(model_.nv);
    const ConstVector qm(buffer_of<double>(q, nq, "q", false), nq);
    const ConstVector vm(buffer_of<double>(v, nv, "v", false), nv);
    const ConstVector am(buffer_of<double>(a, nv, "a", false), nv);
    double* reading = buffer_of<double>(out, 6, "out");
    const std::size_t n = static_cast<std::size_t>(n_contacts > 0 ? n_contacts : 0);
    pinocchio::forwardKinematics(model_, data_, qm);
    for (const std::size_t j : touched_) fext_[j] = pinocchio::Force::Zero();
    touched_.clear();
    const std::int64_t *ja = nullptr, *jb = nullptr, *ga = nullptr, *gb = nullptr;
    const double *p = nullptr, *f = nullptr;
    if (n > 0) {
      ja = buffer_of<std::int64_t>(joint_a, n, "joint_a", false);
      jb = buffer_of<std::int64_t>(joint_b, n, "joint_b", false);
      ga = buffer_of<std::int64_t>(geometry_a, n, "geometry_a", false);
      gb = buffer_of<std::int64_t>(geometry_b, n, "geometry_b", false);
      p = buffer_of<double>(point, 3 * n, "point", false);
      f = buffer_of<double>(forces, 3 * n, "forces", false);
      const std::size_t nj = robot_joint_.size();
      for (std::size_t i = 0; i < n; ++i) {
        if (ja[i] < 0 || jb[i] < 0 || static_cast<std::size_t>(ja[i]) >= nj || static_cast<std::size_t>(jb[i]) >= nj ||
            ga[i] < 0 || gb[i] < 0 || static_cast<std::size_t>(ga[i]) >= fixed_geometry_.size() ||
            static_cast<std::size_t>(gb[i]) >= fixed_geometry_.size()) {
          throw std::out_of_range("ForceTorqueReading: a contact's joint or geometry index is out of range");
        }
      }
      // sensors.joint_contact_wrenches: per joint of the whole model [f, p x f] summed, B's contacts (+) then A's
      // (-) in contact order (np.add.at), about the world origin
      std::fill(wrench_.begin(), wrench_.end(), 0.0);
      for (int side = 0; side < 2; ++side) {
        const std::int64_t* joint = side == 0 ? jb : ja;
        for (std::size_t i = 0; i < n; ++i) {
          double fw[6];
          contact_wrench(p + 3 * i, f + 3 * i, fw);
          double* w = wrench_.data() + 6 * static_cast<std::size_t>(joint[i]);
          for (int k = 0; k < 6; ++k) w[k] += side == 0 ? fw[k] : -fw[k];
        }
      }
      // world wrench about the origin -> the joint-local external force of each robot joint in contact
      for (std::size_t i = 0; i < 2 * n; ++i) {
        const std::size_t j = static_cast<std::size_t>(i < n ? ja[i] : jb[i - n]);
        const std::int64_t jr = robot_joint_[j];
        if (jr <= 0) continue;
        const std::size_t r = static_cast<std::size_t>(jr);
        if (std::find(touched_.begin(), touched_.end(), r) != touched_.end()) continue;
        const double* w = wrench_.data() + 6 * j;
        const pinocchio::Force world(Eigen::Vector3d(w[0], w[1], w[2]), Eigen::Vector3d(w[3], w[4], w[5]));
        fext_[r] = data_.oMi[r].actInv(world);
        touched_.push_back(r);
      }
    }
    pinocchio::rnea(model_, data_, qm, vm, am, fext_);
    pinocchio::Force f_sub;
    if (moving_joint_) {
      f_sub = data_.f[joint_];
    } else {
      const pinocchio::Motion& vj = data_.v[joint_];
      const pinocchio::Motion& agf = data_.a_gf[joint_];
      const pinocchio::Force inertial = fixed_inertia_ * agf;
      f_sub = inertial + vj.cross(fixed_inertia_ * vj);
      for (const std::int64_t c : child_joints_) {
        f_sub = f_sub + data_.liMi[static_cast<std::size_t>(c)].act(data_.f[static_cast<std::size_t>(c)]);
      }
      // contacts on the links merged into the sensor's joint beyond it (their force does not reach data.f)
      bool fixed = false;
      for (std::size_t i = 0; i < n && !fixed; ++i) fixed = fixed_geometry_[gb[i]] || fixed_geometry_[ga[i]];
      if (fixed) {
        double sums[2][6] = {{0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}};   // [B, A] x [force, p x f]
        bool first[2] = {true, true};
        for (int side = 0; side < 2; ++side) {
          const std::int64_t* geometry = side == 0 ? gb : ga;
          for (std::size_t i = 0; i < n; ++i) {
            if (!fixed_geometry_[geometry[i]]) continue;
            double row[6];
            contact_wrench(p + 3 * i, f + 3 * i, row);
            for (int k = 0; k < 6; ++k) sums[side][k] = first[side] ? row[k] : sums[side][k] + row[k];
            first[side] = false;
          }
        }
        const pinocchio::Force on_fixed(
            Eigen::Vector3d(sums[0][0] - sums[1][0], sums[0][1] - sums[1][1], sums[0][2] - sums[1][2]),
            Eigen::Vector3d(sums[0][3] - sums[1][3], sums[0][4] - sums[1][4], sums[0][5] - sums[1][5]));
        f_sub = f_sub - data_.oMi[joint_].actInv(on_fixed);
      }
    }
    const pinocchio::Force sensor = sensor_in_joint_.actInv(f_sub);
    for (int k = 0; k < 6; ++k) reading[k] = -sensor.toVector()[k];
  }

 private:
  bp::object keep_;
  pinocchio::Model& model_;
  pinocchio::Data& data_;
  std::size_t joint_;
  bool moving_joint_;
  pinocchio::Inertia fixed_inertia_;
  pinocchio::SE3 sensor_in_joint_;
  std::vector<std::int64_t> child_joints_, robot_joint_;
  std::vector<std::uint8_t> fixed_geometry_;
  std::vector<double> wrench_;                       // (njoints of the whole model, 6)
  std::vector<pinocchio::Force> fext_;                 // per robot joint, joint frame (pin.rnea's fext)
  std::vector<std::size_t> touched_;                 // robot joints given an external force by the last read
};

// Plain C entry points of the calls above for a compiled caller (numba, sim/tree_step.py), which gets their
// addresses from c_functions() and a RigidBodyDynamics' address from its handle(); every array a raw pointer to
// float64 / int64 data of the sizes the methods name (not checked here: the caller packs them once), dt by value.
// No exception crosses them (Pinocchio's calls on valid sizes do not throw); they return 0.
extern "C" {
std::int64_t contact_sim_tree_kinematics(std::uintptr_t handle, const double* q, const double* v) {
  reinterpret_cast<RigidBodyDynamics*>(handle)->kinematics_raw(q, v);
  return 0;
}

std::int64_t contact_sim_tree_read_kinematics(std::uintptr_t handle, double* jacobian, double* placement,
                                              const std::int64_t* joints, const std::int64_t* slots, std::int64_t n) {
  reinterpret_cast<const RigidBodyDynamics*>(handle)->read_kinematics(jacobian, placement, joints, slots, n);
  return 0;
}

std::int64_t contact_sim_tree_dynamics(std::uintptr_t handle, const double* q, const double* v, const double* q_target,
                                       double* mass_matrix, double* nle, double* gravity, double* position_error,
                                       std::int64_t with_gravity) {
  reinterpret_cast<RigidBodyDynamics*>(handle)->dynamics_raw(q, v, q_target, mass_matrix, nle, gravity,
                                                             position_error, with_gravity != 0);
  return 0;
}

std::int64_t contact_sim_tree_frame_jacobian(std::uintptr_t handle, std::int64_t frame, double* jacobian) {
  reinterpret_cast<RigidBodyDynamics*>(handle)->frame_jacobian_raw(frame, jacobian);
  return 0;
}

std::int64_t contact_sim_tree_integrate(std::uintptr_t handle, const double* q, const double* v, double dt,
                                        double* q_next) {
  reinterpret_cast<RigidBodyDynamics*>(handle)->integrate_raw(q, v, dt, q_next);
  return 0;
}
}

// (kinematics, read_kinematics, dynamics, integrate, frame_jacobian): the C entry points' addresses
bp::tuple c_functions() {
  return bp::make_tuple(reinterpret_cast<std::uintptr_t>(&contact_sim_tree_kinematics),
                        reinterpret_cast<std::uintptr_t>(&contact_sim_tree_read_kinematics),
                        reinterpret_cast<std::uintptr_t>(&contact_sim_tree_dynamics),
                        reinterpret_cast<std::uintptr_t>(&contact_sim_tree_integrate),
                        reinterpret_cast<std::uintptr_t>(&contact_sim_tree_frame_jacobian));
}

BOOST_PYTHON_MODULE(_rigid_body_dynamics) {
  bp::class_<RigidBodyDynamics, boost::noncopyable>(
      "RigidBodyDynamics", bp::init<bp::object, bp::object, bp::object, bp::object, bp::object>())
      .def("dynamics", &RigidBodyDynamics::dynamics)
      .def("integrate", &RigidBodyDynamics::integrate)
      .def("kinematics", &RigidBodyDynamics::kinematics)
      .def("joint_gravity", &RigidBodyDynamics::joint_gravity)
      .def("handle", &RigidBodyDynamics::handle)
      .def("jacobian_columns", &RigidBodyDynamics::jacobian_columns);
  bp::def("c_functions", &c_functions);
  bp::class_<ForceTorqueReading, boost::noncopyable>(
      "ForceTorqueReading", bp::init<bp::object, bp::object, int, bp::object, bool, bp::object, bp::object,
                                     bp::object, bp::object>())
      .def("read", &ForceTorqueReading::read);
}
