// The Pinocchio calls of one Simulator step (sim/simulator.py) in three calls from Python, into preallocated
// numpy buffers: the mass matrix, the nonlinear effects, the gravity force and the position error of the step's
// start (Simulator._advance), the configuration update q + dt v (pin.integrate), and the kinematics of the new
// state (Simulator._update_kinematics). The same Pinocchio functions, with the same arguments, in the same order as
// the Python calls they replace (the reference, used when this module is not built): bit-identical results. What
// it saves is the Boost.Python argument conversions and the numpy arrays that every pin.* call makes (~1-3 us each).
//
// Built by contact_sim_ros/native_build.py (g++ against the headers and libraries of the pinocchio wheel, at
// set-up: python -m contact_sim_ros.jit). Units: SI (kg, m, rad, N, N*m, s).
#include <Python.h>

#include <boost/python.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <pinocchio/multibody.hpp>
#include <pinocchio/algorithm/crba.hpp>
#include <pinocchio/algorithm/jacobian.hpp>
#include <pinocchio/algorithm/joint-configuration.hpp>
#include <pinocchio/algorithm/kinematics.hpp>
#include <pinocchio/algorithm/rnea.hpp>

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
    const ConstVector qm(buffer_of<double>(q, nq_, "q", false), nq_);
    const ConstVector vm(buffer_of<double>(v, nv_, "v", false), nv_);
    const ConstVector target(buffer_of<double>(q_target, nq_, "q_target", false), nq_);
    Vector error(buffer_of<double>(position_error, nv_, "position_error"), nv_);
    // as pin.crba (Pinocchio's binding crba_proxy): M zeroed first (crba adds a mimic joint's terms into its
    // leader's entries), then made symmetric
    data_.M.fill(0.0);
    pinocchio::crba(model_, data_, qm, pinocchio::Convention::WORLD);
    data_.M.triangularView<Eigen::StrictlyLower>() = data_.M.transpose().triangularView<Eigen::StrictlyLower>();
    mass_matrix_ = data_.M;
    nle_ = pinocchio::nonLinearEffects(model_, data_, qm, vm);
    if (with_gravity) gravity_ = pinocchio::computeGeneralizedGravity(model_, data_, qm);
    pinocchio::difference(model_, qm, target, error);
  }

  // q_next = integrate(q, dt * v) (pin.integrate(model, q, dt * v)) into `q_next` (nq,).
  void integrate(bp::object q, bp::object v, double dt, bp::object q_next) {
    const ConstVector qm(buffer_of<double>(q, nq_, "q", false), nq_);
    const ConstVector vm(buffer_of<double>(v, nv_, "v", false), nv_);
    Vector out(buffer_of<double>(q_next, nq_, "q_next"), nq_);
    step_.noalias() = dt * vm;
    pinocchio::integrate(model_, qm, step_, out);
  }

  // The kinematics a step reads: joint placements and velocities at (q, v) (pin.forwardKinematics) and the joint
  // Jacobians of those placements (pin.computeJointJacobians(model, data)).
  void kinematics(bp::object q, bp::object v) {
    const ConstVector qm(buffer_of<double>(q, nq_, "q", false), nq_);
    const ConstVector vm(buffer_of<double>(v, nv_, "v", false), nv_);
    pinocchio::forwardKinematics(model_, data_, qm, vm);
    pinocchio::computeJointJacobians(model_, data_);
  }

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

BOOST_PYTHON_MODULE(_rigid_body_dynamics) {
  bp::class_<RigidBodyDynamics, boost::noncopyable>(
      "RigidBodyDynamics", bp::init<bp::object, bp::object, bp::object, bp::object, bp::object>())
      .def("dynamics", &RigidBodyDynamics::dynamics)
      .def("integrate", &RigidBodyDynamics::integrate)
      .def("kinematics", &RigidBodyDynamics::kinematics)
      .def("joint_gravity", &RigidBodyDynamics::joint_gravity);
}
