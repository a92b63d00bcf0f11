/* core/model.c - load an MJCF file through libmujoco and convert the compiled
 * mjModel into bcg's fixed-capacity bcg_mdata (see bcg/model.h).
 *
 * Everything bcg cannot represent is refused with a one-line message that
 * names the file and the offending element by name and index ("geom 'x'
 * (#3) of body 'y'", "joint 'j' (#5) of body 'b'"; index only when unnamed);
 * geoms and joints always with their body, actuators with their joint.
 * Names longer than bcg keeps (BCG_NAME_LEN - 1 characters) are refused too,
 * and the message is one line whatever the names hold (a control character
 * in a name, e.g. an XML &#10;, is shown as '?'). */
#include "bcg/model.h"
#include "bcg/spatial.h"

#include <errno.h>
#include <mujoco/mujoco.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(mjVERSION_HEADER) || mjVERSION_HEADER < 3000000
#error "bcg needs MuJoCo 3's headers (make deps puts them under deps/)"
#endif

#define DEFAULT_MODEL "/usr/share/mujoco/model/humanoid/humanoid.xml"

typedef struct conv {
  const mjModel *mj;
  bcg_model *out;
  const char *path;
  char *err;
  size_t errlen;
  bcg_model_opts *opts;
  mjData *d0; /* kinematics at qpos0 (mesh hull points: the lowest first) */
  int only[BCG_MAX_BODY]; /* contact_bodies: 1 where a body's geoms touch the floor */
} conv;

static int fail(conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(conv *c, const char *fmt, ...) {
  if (!c->err || c->errlen == 0) return -1;
  int n = snprintf(c->err, c->errlen, "%s: ", c->path);
  if (n < 0) n = 0;
  if ((size_t)n < c->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
  }
  for (char *p = c->err; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
  return -1;
}

/* "kind 'name'" or "kind #index" for messages. */
static const char *label(const mjModel *m, int type, const char *kind, int id, char *buf, size_t len) {
  const char *name = mj_id2name(m, type, id);
  if (name && name[0])
    snprintf(buf, len, "%s '%s'", kind, name);
  else
    snprintf(buf, len, "%s #%d", kind, id);
  return buf;
}

/* "kind 'name' (#id)" or "kind #id" */
static void name_id(const mjModel *m, int type, const char *kind, int id, char *buf, size_t len) {
  const char *name = mj_id2name(m, type, id);
  if (name && name[0])
    snprintf(buf, len, "%s '%s' (#%d)", kind, name, id);
  else
    snprintf(buf, len, "%s #%d", kind, id);
}

/* "geom 'x' (#3) of body 'y'": a geom or joint with its body (the world's
 * geoms: "of the world body") */
static const char *glabel(const mjModel *m, int g, char *buf, size_t len) {
  char a[200], b[200];
  int body = m->geom_bodyid[g];
  name_id(m, mjOBJ_GEOM, "geom", g, a, sizeof a);
  if (body == 0) snprintf(buf, len, "%s of the world body", a);
  else label(m, mjOBJ_BODY, "body", body, b, sizeof b), snprintf(buf, len, "%s of %s", a, b);
  return buf;
}
static const char *jlabel(const mjModel *m, int j, char *buf, size_t len) {
  char a[200], b[200];
  name_id(m, mjOBJ_JOINT, "joint", j, a, sizeof a);
  label(m, mjOBJ_BODY, "body", m->jnt_bodyid[j], b, sizeof b);
  snprintf(buf, len, "%s of %s", a, b);
  return buf;
}

static void copy_name(char *dst, const mjModel *m, int type, int id) {
  const char *name = mj_id2name(m, type, id);
  snprintf(dst, BCG_NAME_LEN, "%s", name ? name : "");
}

/* A name bcg keeps must fit its BCG_NAME_LEN field whole: a cut one would
 * not match the file's own (a motion file's column names, messages). */
static int name_fits(conv *c, int type, int id, const char *what) {
  const char *name = mj_id2name(c->mj, type, id);
  if (name && strlen(name) >= BCG_NAME_LEN)
    return fail(c, "%s: name longer than %d characters (bcg keeps names of at most %d)", what, BCG_NAME_LEN - 1,
                BCG_NAME_LEN - 1);
  return 0;
}

/* v_out = R(q) v for a unit quaternion q = (w, x, y, z). */
static void quat_rot(const mjtNum *q, const mjtNum *v, mjtNum *o) {
  mjtNum mat[9];
  mju_quat2Mat(mat, q);
  mju_mulMatVec(o, mat, v, 3, 3);
}

static const char *geom_type_name(int t) {
  switch (t) {
    case mjGEOM_PLANE: return "plane";
    case mjGEOM_HFIELD: return "hfield";
    case mjGEOM_SPHERE: return "sphere";
    case mjGEOM_CAPSULE: return "capsule";
    case mjGEOM_ELLIPSOID: return "ellipsoid";
    case mjGEOM_CYLINDER: return "cylinder";
    case mjGEOM_BOX: return "box";
    case mjGEOM_MESH: return "mesh";
    default: return "unknown";
  }
}

static int can_collide(const mjModel *m, int g1, int g2) {
  return (m->geom_contype[g1] & m->geom_conaffinity[g2]) || (m->geom_contype[g2] & m->geom_conaffinity[g1]);
}

/* Whether MuJoCo's <exclude> removes contacts between bodies b1 and b2; the
 * signature is body1 << 16 + body2 (MuJoCo 3; the compiler orders the pair,
 * both orders are accepted here). */
static int excluded(const mjModel *m, int b1, int b2) {
  int s1 = (b1 << 16) + b2, s2 = (b2 << 16) + b1;
  for (int i = 0; i < m->nexclude; i++)
    if (m->exclude_signature[i] == s1 || m->exclude_signature[i] == s2) return 1;
  return 0;
}

static int add_cp(conv *c, int g, const mjtNum *pos, mjtNum radius, mjtNum friction) {
  bcg_mdata *d = &c->out->m;
  const mjModel *m = c->mj;
  char lb[512];
  if (d->ncp >= BCG_MAX_CP)
    return fail(c, "%s: too many contact points (more than BCG_MAX_CP = %d)", glabel(m, g, lb, sizeof lb),
                BCG_MAX_CP);
  if (name_fits(c, mjOBJ_GEOM, g, glabel(m, g, lb, sizeof lb))) return -1;
  int k = d->ncp++;
  d->cp_body[k] = m->geom_bodyid[g];
  d->cp_geom[k] = g;
  for (int i = 0; i < 3; i++) d->cp_pos[k][i] = (bcg_real)pos[i];
  d->cp_radius[k] = (bcg_real)radius;
  d->cp_friction[k] = (bcg_real)friction;
  copy_name(c->out->cp_geom_name[k], m, mjOBJ_GEOM, g);
  return 0;
}

static int convert_capacity(conv *c) {
  const mjModel *m = c->mj;
  if (m->nbody > BCG_MAX_BODY)
    return fail(c, "%ld bodies exceed BCG_MAX_BODY = %d", (long)m->nbody, BCG_MAX_BODY);
  if (m->njnt > BCG_MAX_JNT)
    return fail(c, "%ld joints exceed BCG_MAX_JNT = %d", (long)m->njnt, BCG_MAX_JNT);
  if (m->nv > BCG_MAX_DOF)
    return BCG_MAX_DOF < BCG_DEFAULT_MAX_DOF
               ? fail(c, "%ld dofs exceed BCG_MAX_DOF = %d (this build's MAX_DOF; the default build takes %d)",
                      (long)m->nv, BCG_MAX_DOF, BCG_DEFAULT_MAX_DOF)
               : fail(c, "%ld dofs exceed BCG_MAX_DOF = %d", (long)m->nv, BCG_MAX_DOF);
  if (m->nq > BCG_MAX_Q)
    return fail(c, "%ld qpos entries exceed BCG_MAX_Q = %d (MAX_DOF + 16)", (long)m->nq, BCG_MAX_Q);
  if (m->nu > BCG_MAX_ACT)
    return fail(c, "%ld actuators exceed BCG_MAX_ACT = %d", (long)m->nu, BCG_MAX_ACT);
  return 0;
}

static int convert_unsupported(conv *c) {
  const mjModel *m = c->mj;
  char lb[512];
  if (m->ntendon > 0)
    return fail(c, "%s: tendons are not supported", label(m, mjOBJ_TENDON, "tendon", 0, lb, sizeof lb));
  if (m->neq > 0)
    return fail(c, "%s: equality constraints are not supported", label(m, mjOBJ_EQUALITY, "equality", 0, lb, sizeof lb));
  if (m->nmocap > 0)
    for (int b = 0; b < m->nbody; b++)
      if (m->body_mocapid[b] >= 0)
        return fail(c, "%s: mocap bodies are not supported", label(m, mjOBJ_BODY, "body", b, lb, sizeof lb));
  if (m->opt.density != 0 || m->opt.viscosity != 0)
    return fail(c, "option: fluid forces (density/viscosity) are not supported");
  if (m->na > 0) {
    for (int a = 0; a < m->nu; a++)
      if (m->actuator_actnum[a] > 0)
        return fail(c, "%s: activation dynamics not supported (only actuators without activation state: motor, "
                    "position, velocity, general)", label(m, mjOBJ_ACTUATOR, "actuator", a, lb, sizeof lb));
    return fail(c, "actuator activations (na = %ld) are not supported", (long)m->na);
  }
  return 0;
}

static int convert_bodies(conv *c) {
  const mjModel *m = c->mj;
  bcg_mdata *d = &c->out->m;
  d->nbody = m->nbody;
  for (int b = 0; b < m->nbody; b++) {
    d->body_parent[b] = b == 0 ? -1 : m->body_parentid[b];
    if (b > 0 && d->body_parent[b] >= b) {
      char lb[96];
      return fail(c, "%s: parent index not smaller than its own", label(m, mjOBJ_BODY, "body", b, lb, sizeof lb));
    }
    d->body_jntnum[b] = m->body_jntnum[b];
    d->body_jntadr[b] = m->body_jntnum[b] > 0 ? m->body_jntadr[b] : -1;
    for (int i = 0; i < 3; i++) {
      d->body_pos[b][i] = (bcg_real)m->body_pos[3 * b + i];
      d->body_ipos[b][i] = (bcg_real)m->body_ipos[3 * b + i];
      d->body_inertia[b][i] = (bcg_real)m->body_inertia[3 * b + i];
    }
    for (int i = 0; i < 4; i++) {
      d->body_quat[b][i] = (bcg_real)m->body_quat[4 * b + i];
      d->body_iquat[b][i] = (bcg_real)m->body_iquat[4 * b + i];
    }
    d->body_mass[b] = (bcg_real)m->body_mass[b];
    char lb[96];
    if (name_fits(c, mjOBJ_BODY, b, label(m, mjOBJ_BODY, "body", b, lb, sizeof lb))) return -1;
    copy_name(c->out->body_name[b], m, mjOBJ_BODY, b);
  }
  return 0;
}

static int convert_joints(conv *c) {
  const mjModel *m = c->mj;
  bcg_mdata *d = &c->out->m;
  const int nolimit = (m->opt.disableflags & mjDSBL_LIMIT) != 0;
  const int nospring = (m->opt.disableflags & mjDSBL_SPRING) != 0;
  const int nodamper = (m->opt.disableflags & mjDSBL_DAMPER) != 0;
  char lb[512];
  d->njnt = m->njnt;
  d->nq = m->nq;
  d->nv = m->nv;
  for (int j = 0; j < m->njnt; j++) {
    int t = m->jnt_type[j];
    if (t != mjJNT_FREE && t != mjJNT_BALL && t != mjJNT_SLIDE && t != mjJNT_HINGE)
      return fail(c, "%s: joint type %d is not supported", jlabel(m, j, lb, sizeof lb), t);
    d->jnt_type[j] = t;
    d->jnt_body[j] = m->jnt_bodyid[j];
    d->jnt_qposadr[j] = m->jnt_qposadr[j];
    d->jnt_dofadr[j] = m->jnt_dofadr[j];
    for (int i = 0; i < 3; i++) {
      d->jnt_pos[j][i] = (bcg_real)m->jnt_pos[3 * j + i];
      d->jnt_axis[j][i] = (bcg_real)m->jnt_axis[3 * j + i];
    }
    d->jnt_limited[j] = nolimit ? 0 : m->jnt_limited[j];
    d->jnt_range[j][0] = (bcg_real)m->jnt_range[2 * j];
    d->jnt_range[j][1] = (bcg_real)m->jnt_range[2 * j + 1];
    d->jnt_stiffness[j] = nospring ? 0 : (bcg_real)m->jnt_stiffness[j];
    if (name_fits(c, mjOBJ_JOINT, j, jlabel(m, j, lb, sizeof lb))) return -1;
    copy_name(c->out->jnt_name[j], m, mjOBJ_JOINT, j);
  }
  for (int v = 0; v < m->nv; v++) {
    d->dof_body[v] = m->dof_bodyid[v];
    d->dof_jnt[v] = m->dof_jntid[v];
    d->dof_parent[v] = m->dof_parentid[v];
    d->dof_armature[v] = (bcg_real)m->dof_armature[v];
    d->dof_damping[v] = nodamper ? 0 : (bcg_real)m->dof_damping[v];
    const int j = m->dof_jntid[v];
    d->dof_frictionloss[v] =
        (m->opt.disableflags & (mjDSBL_FRICTIONLOSS | mjDSBL_CONSTRAINT)) ? 0 : (bcg_real)m->dof_frictionloss[v];
    /* actuatorfrcrange: hinge and slide joints (one dof each) */
    const int jt = m->jnt_type[j];
    d->dof_actfrclimited[v] = (jt == mjJNT_HINGE || jt == mjJNT_SLIDE) && m->jnt_actfrclimited[j];
    d->dof_actfrcrange[v][0] = (bcg_real)m->jnt_actfrcrange[2 * j];
    d->dof_actfrcrange[v][1] = (bcg_real)m->jnt_actfrcrange[2 * j + 1];
  }
  for (int q = 0; q < m->nq; q++) {
    d->qpos0[q] = (bcg_real)m->qpos0[q];
    d->qpos_spring[q] = (bcg_real)m->qpos_spring[q];
  }
  return 0;
}

static int convert_actuators(conv *c) {
  const mjModel *m = c->mj;
  bcg_mdata *d = &c->out->m;
  char lb[512];
  d->nu = m->nu;
  for (int a = 0; a < m->nu; a++) {
    name_id(m, mjOBJ_ACTUATOR, "actuator", a, lb, sizeof lb);
    if (m->actuator_trntype[a] == mjTRN_JOINT && m->actuator_trnid[2 * a] >= 0 &&
        m->actuator_trnid[2 * a] < m->njnt) {
      char jl[400];
      size_t n = strlen(lb);
      snprintf(lb + n, sizeof lb - n, " on %s", jlabel(m, m->actuator_trnid[2 * a], jl, sizeof jl));
    }
    if (m->actuator_trntype[a] != mjTRN_JOINT)
      return fail(c, "%s: transmission type not supported (only joint transmission)", lb);
    if (m->actuator_dyntype[a] != mjDYN_NONE)
      return fail(c, "%s: activation dynamics not supported (only actuators without activation state: motor, position, velocity, general)", lb);
    const mjtNum *gp = m->actuator_gainprm + mjNGAIN * a, *bp = m->actuator_biasprm + mjNBIAS * a;
    if (m->actuator_gaintype[a] != mjGAIN_FIXED && !(m->actuator_gaintype[a] == mjGAIN_AFFINE && gp[1] == 0 && gp[2] == 0))
      return fail(c, "%s: gain type not supported (only fixed gains: motor, position, velocity, general)", lb);
    if (m->actuator_biastype[a] != mjBIAS_NONE && m->actuator_biastype[a] != mjBIAS_AFFINE)
      return fail(c, "%s: bias type not supported (only none and affine: motor, position, velocity, general)", lb);
    int j = m->actuator_trnid[2 * a];
    int jt = m->jnt_type[j];
    if (jt != mjJNT_HINGE && jt != mjJNT_SLIDE)
      return fail(c, "%s: only hinge and slide joints can be actuated", lb);
    for (int k = 1; k < 6; k++)
      if (m->actuator_gear[6 * a + k] != 0)
        return fail(c, "%s: gear with more than one component is not supported on a joint transmission", lb);
    d->act_jnt[a] = j;
    d->act_dof[a] = m->jnt_dofadr[j];
    d->act_gear[a] = (bcg_real)m->actuator_gear[6 * a];
    d->act_gain[a] = (bcg_real)gp[0];
    for (int k = 0; k < 3; k++)
      d->act_bias[a][k] = m->actuator_biastype[a] == mjBIAS_AFFINE ? (bcg_real)bp[k] : 0;
    d->act_forcelimited[a] = m->actuator_forcelimited[a] != 0;
    d->act_forcerange[a][0] = (bcg_real)m->actuator_forcerange[2 * a];
    d->act_forcerange[a][1] = (bcg_real)m->actuator_forcerange[2 * a + 1];
    d->act_ctrllimited[a] = m->actuator_ctrllimited[a] && !(m->opt.disableflags & mjDSBL_CLAMPCTRL);
    d->act_ctrlrange[a][0] = (bcg_real)m->actuator_ctrlrange[2 * a];
    d->act_ctrlrange[a][1] = (bcg_real)m->actuator_ctrlrange[2 * a + 1];
    if (name_fits(c, mjOBJ_ACTUATOR, a, lb)) return -1;
    copy_name(c->out->act_name[a], m, mjOBJ_ACTUATOR, a);
  }
  return 0;
}

#define CYL_RIM 8

/* A mesh geom's contact points: vertices of its convex hull (libmujoco's
 * mesh graph; all vertices where it has none), at most opts->mesh_points:
 * the lowest in the default pose (qpos0) first, then each next the one
 * farthest from those chosen (in the geom frame). Radius 0. */
static int add_mesh_points(conv *c, int g, mjtNum mu) {
  const mjModel *m = c->mj;
  int mesh = m->geom_dataid[g];
  char lb[512];
  if (mesh < 0) return fail(c, "%s: mesh geom without mesh data", glabel(m, g, lb, sizeof lb));
  const float *V = m->mesh_vert + 3 * (size_t)m->mesh_vertadr[mesh];
  int nvert = m->mesh_vertnum[mesh], nh = nvert;
  const int *ids = NULL;
  if (m->mesh_graphadr[mesh] >= 0) {
    const int *gr = m->mesh_graph + m->mesh_graphadr[mesh];
    nh = gr[0];
    ids = gr + 2 + nh; /* numvert, numface, vert_edgeadr[numvert], vert_globalid[numvert] */
  }
  if (nh <= 0) return fail(c, "%s: mesh without vertices", glabel(m, g, lb, sizeof lb));
  int want = c->opts->mesh_points < nh ? c->opts->mesh_points : nh;
  mjtNum *dist = malloc(sizeof(mjtNum) * (size_t)nh);
  if (!dist) return fail(c, "out of memory");
  const mjtNum *xp = c->d0->geom_xpos + 3 * g, *xm = c->d0->geom_xmat + 9 * g;
  int pick = 0;
  mjtNum lo = 1e300;
  for (int k = 0; k < nh; k++) {
    const float *v = V + 3 * (ids ? ids[k] : k);
    mjtNum z = xp[2] + xm[6] * v[0] + xm[7] * v[1] + xm[8] * v[2];
    if (z < lo) lo = z, pick = k;
    dist[k] = 1e300;
  }
  const mjtNum *gp = m->geom_pos + 3 * g, *gq = m->geom_quat + 4 * g;
  for (int n = 0; n < want; n++) {
    const float *v = V + 3 * (ids ? ids[pick] : pick);
    mjtNum e[3] = {v[0], v[1], v[2]}, p[3];
    quat_rot(gq, e, p);
    mju_addTo3(p, gp);
    if (add_cp(c, g, p, 0, mu)) { free(dist); return -1; }
    int next = -1;
    mjtNum far = -1;
    for (int k = 0; k < nh; k++) {
      const float *w = V + 3 * (ids ? ids[k] : k);
      mjtNum dx = w[0] - v[0], dy = w[1] - v[1], dz = w[2] - v[2], dd = dx * dx + dy * dy + dz * dz;
      if (dd < dist[k]) dist[k] = dd;
      if (dist[k] > far) far = dist[k], next = k;
    }
    if (next < 0 || far <= 0) break; /* every vertex already chosen */
    pick = next;
  }
  free(dist);
  return 0;
}

/* [model] contact_bodies: mark the listed bodies (every name must exist). */
static int parse_contact_bodies(conv *c) {
  const char *spec = c->opts->contact_bodies;
  if (!spec || !spec[0]) return 0;
  char buf[4096];
  if (strlen(spec) >= sizeof buf) {
    snprintf(c->opts->failed_key, sizeof c->opts->failed_key, "contact_bodies");
    return fail(c, "contact_bodies: longer than %zu characters", sizeof buf - 1);
  }
  snprintf(buf, sizeof buf, "%s", spec);
  char *save = NULL;
  int n = 0;
  for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
    while (*it == ' ' || *it == '\t') it++;
    char *e = it + strlen(it);
    while (e > it && (e[-1] == ' ' || e[-1] == '\t')) *--e = 0;
    if (!it[0]) continue;
    int b = mj_name2id(c->mj, mjOBJ_BODY, it);
    if (b < 0) {
      snprintf(c->opts->failed_key, sizeof c->opts->failed_key, "contact_bodies");
      return fail(c, "contact_bodies: no body named '%s' in the model", it);
    }
    c->only[b] = 1;
    n++;
  }
  if (n == 0) {
    snprintf(c->opts->failed_key, sizeof c->opts->failed_key, "contact_bodies");
    return fail(c, "contact_bodies: no body names in '%s'", spec);
  }
  return 0;
}

/* The floor: the collidable planes; only one, horizontal, on the world body
 * (or bodies welded to it). *floor = its geom, -1 when there is none. */
static int find_floor(conv *c, int *floor_out) {
  const mjModel *m = c->mj;
  bcg_mdata *d = &c->out->m;
  char lb[512];
  int floor = -1;
  for (int g = 0; g < m->ngeom; g++) {
    if (m->geom_type[g] != mjGEOM_PLANE) continue;
    if (m->geom_contype[g] == 0 && m->geom_conaffinity[g] == 0) continue; /* visual */
    glabel(m, g, lb, sizeof lb);
    if (m->body_weldid[m->geom_bodyid[g]] != 0)
      return fail(c, "%s: plane on a moving body is not supported (only a floor on the world body)", lb);
    if (floor >= 0) {
      char lb2[512];
      return fail(c, "%s: more than one floor plane (first is %s)", lb, glabel(m, floor, lb2, sizeof lb2));
    }
    /* The world body (and bodies welded to it) sit at the origin with their
     * compiled frames; compose body frame and geom frame for static bodies. */
    mjtNum pos[3], quat[4], n[3], z[3] = {0, 0, 1};
    int b = m->geom_bodyid[g];
    mju_copy3(pos, m->geom_pos + 3 * g);
    mju_copy4(quat, m->geom_quat + 4 * g);
    while (b != 0) { /* static body chain up to the world */
      mjtNum p2[3], q2[4];
      quat_rot(m->body_quat + 4 * b, pos, p2);
      mju_addTo3(p2, m->body_pos + 3 * b);
      mju_mulQuat(q2, m->body_quat + 4 * b, quat);
      mju_copy3(pos, p2);
      mju_copy4(quat, q2);
      b = m->body_parentid[b];
    }
    quat_rot(quat, z, n);
    if (fabs(n[0]) > 1e-9 || fabs(n[1]) > 1e-9 || n[2] < 1 - 1e-9)
      return fail(c, "%s: floor plane must be horizontal with normal +z (normal is %g %g %g)", lb, n[0], n[1], n[2]);
    floor = g;
    d->has_floor = 1;
    d->floor_z = (bcg_real)pos[2];
  }
  *floor_out = floor;
  return 0;
}

static int convert_contacts(conv *c) {
  const mjModel *m = c->mj;
  char lb[512];
  int floor = -1;
  if (find_floor(c, &floor)) return -1;
  for (int i = 0; i < m->npair; i++)
    if (floor >= 0 && (m->pair_geom1[i] == floor || m->pair_geom2[i] == floor))
      return fail(c, "contact pair #%d with the floor: explicit <contact><pair> is not supported", i);

  if (floor < 0 || (m->opt.disableflags & (mjDSBL_CONTACT | mjDSBL_CONSTRAINT))) return 0;

  if (parse_contact_bodies(c)) return -1;
  c->d0 = mj_makeData(m);
  if (!c->d0) return fail(c, "out of memory (mjData)");
  mj_kinematics(m, c->d0);
  int fb = m->geom_bodyid[floor];
  for (int g = 0; g < m->ngeom; g++) {
    if (g == floor) continue;
    int b = m->geom_bodyid[g];
    if (m->geom_contype[g] == 0 && m->geom_conaffinity[g] == 0) continue; /* visual */
    if (!can_collide(m, g, floor)) continue;
    if (m->body_weldid[b] == m->body_weldid[fb]) {
      /* static geometry: it never touches the floor, but moving bodies could
       * touch it, which bcg cannot represent */
      for (int h = 0; h < m->ngeom; h++)
        if (m->body_weldid[m->geom_bodyid[h]] != 0 && can_collide(m, g, h))
          return fail(c, "%s: static %s geom other than the floor is not supported", glabel(m, g, lb, sizeof lb),
                      geom_type_name(m->geom_type[g]));
      continue;
    }
    if (excluded(m, b, fb)) continue;
    if (c->opts->contact_bodies && c->opts->contact_bodies[0] && !c->only[b]) continue;
    if (m->geom_type[g] == mjGEOM_MESH && c->opts->mesh_points <= 0) continue;

    /* pairing rule of mj_contactParam: the higher priority wins, else max */
    mjtNum mu;
    int condim;
    if (m->geom_priority[g] != m->geom_priority[floor]) {
      int w = m->geom_priority[g] > m->geom_priority[floor] ? g : floor;
      mu = m->geom_friction[3 * w];
      condim = m->geom_condim[w];
    } else {
      mu = mju_max(m->geom_friction[3 * g], m->geom_friction[3 * floor]);
      condim = m->geom_condim[g] > m->geom_condim[floor] ? m->geom_condim[g] : m->geom_condim[floor];
    }
    if (condim == 1) mu = 0; /* frictionless contact */

    const mjtNum *gp = m->geom_pos + 3 * g, *gq = m->geom_quat + 4 * g, *sz = m->geom_size + 3 * g;
    glabel(m, g, lb, sizeof lb);
    switch (m->geom_type[g]) {
      case mjGEOM_SPHERE:
        if (add_cp(c, g, gp, sz[0], mu)) return -1;
        break;
      case mjGEOM_CAPSULE:
        for (int s = -1; s <= 1; s += 2) {
          mjtNum e[3] = {0, 0, s * sz[1]}, p[3];
          quat_rot(gq, e, p);
          mju_addTo3(p, gp);
          if (add_cp(c, g, p, sz[0], mu)) return -1;
        }
        break;
      case mjGEOM_BOX:
        for (int k = 0; k < 8; k++) {
          mjtNum e[3] = {(k & 1 ? 1 : -1) * sz[0], (k & 2 ? 1 : -1) * sz[1], (k & 4 ? 1 : -1) * sz[2]}, p[3];
          quat_rot(gq, e, p);
          mju_addTo3(p, gp);
          if (add_cp(c, g, p, 0, mu)) return -1;
        }
        break;
      case mjGEOM_CYLINDER:
        /* CYL_RIM points on each end circle (radius 0): the lowest point of
         * a tilted cylinder is on a rim; between two points the floor sees
         * the chord, at most r (1 - cos(pi / CYL_RIM)) higher */
        for (int s = -1; s <= 1; s += 2)
          for (int k = 0; k < CYL_RIM; k++) {
            mjtNum ang = 2 * mjPI * k / CYL_RIM;
            mjtNum e[3] = {sz[0] * cos(ang), sz[0] * sin(ang), s * sz[1]}, p[3];
            quat_rot(gq, e, p);
            mju_addTo3(p, gp);
            if (add_cp(c, g, p, 0, mu)) return -1;
          }
        break;
      case mjGEOM_MESH:
        if (add_mesh_points(c, g, mu)) return -1;
        break;
      default:
        return fail(c, "%s: %s collision geom touching the floor is not supported (only sphere, capsule, box, "
                    "cylinder, mesh; set contype=conaffinity=0 to make it visual, or leave its body out of "
                    "[model] contact_bodies)", lb, geom_type_name(m->geom_type[g]));
    }
  }
  return 0;
}

/* ---- self-collision capsules (struct bcg_model, sc_*) ------------------------ */

/* The capsule fitted to points P[n] (geom frame): the principal axis of
 * the points, the mean distance from it as radius, the extent along it less
 * the radius at each end (a sphere at the middle when that is negative). */
static void fit_capsule(const mjtNum (*P)[3], int n, mjtNum a[3], mjtNum b[3], mjtNum *r) {
  mjtNum mean[3] = {0, 0, 0}, C[9] = {0};
  for (int k = 0; k < n; k++) mju_addTo3(mean, P[k]);
  mju_scl3(mean, mean, 1.0 / n);
  for (int k = 0; k < n; k++)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) C[3 * i + j] += (P[k][i] - mean[i]) * (P[k][j] - mean[j]) / n;
  mjtNum ev[3], V[9], q[4], ax[3];
  mju_eig3(ev, V, q, C);
  int best = 0;
  for (int i = 1; i < 3; i++)
    if (ev[i] > ev[best]) best = i;
  for (int i = 0; i < 3; i++) ax[i] = V[3 * i + best]; /* columns are the eigenvectors */
  mju_normalize3(ax);
  mjtNum lo = 1e300, hi = -1e300, rs = 0;
  for (int k = 0; k < n; k++) {
    mjtNum d[3], t;
    mju_sub3(d, P[k], mean);
    t = mju_dot3(d, ax);
    if (t < lo) lo = t;
    if (t > hi) hi = t;
    mju_addToScl3(d, ax, -t);
    rs += mju_norm3(d);
  }
  *r = rs / n;
  mjtNum mid = 0.5 * (lo + hi), hl = 0.5 * (hi - lo) - *r;
  if (hl < 0) hl = 0;
  for (int i = 0; i < 3; i++) a[i] = mean[i] + (mid - hl) * ax[i], b[i] = mean[i] + (mid + hl) * ax[i];
}

/* the distance of two segments, W = A0 A1 B0 B1 (bcg_seg_nearest, the closed
 * form the self-collision penalty uses; once per pair at load time) */
static double seg_dist(const mjtNum W[4][3]) {
  bcg_real E[4][3], s, t, n[3];
  for (int i = 0; i < 4; i++)
    for (int q = 0; q < 3; q++) E[i][q] = (bcg_real)W[i][q];
  return (double)bcg_seg_nearest(E[0], E[1], E[2], E[3], &s, &t, n);
}

/* Whether MuJoCo's collision filters let geoms g1 and g2 of different
 * bodies touch: contype/conaffinity, <exclude>, welded bodies, parent and
 * child (filterparent). */
static int self_pair_ok(const mjModel *m, int g1, int g2) {
  int b1 = m->geom_bodyid[g1], b2 = m->geom_bodyid[g2];
  int w1 = m->body_weldid[b1], w2 = m->body_weldid[b2];
  if (w1 == w2 || !can_collide(m, g1, g2) || excluded(m, b1, b2)) return 0;
  if (!(m->opt.disableflags & mjDSBL_FILTERPARENT) && w1 && w2) {
    int p1 = m->body_weldid[m->body_parentid[w1]], p2 = m->body_weldid[m->body_parentid[w2]];
    if (w1 == p2 || w2 == p1) return 0;
  }
  return 1;
}

static int convert_self(conv *c) {
  const mjModel *m = c->mj;
  bcg_model *M = c->out;
  if (m->opt.disableflags & (mjDSBL_CONTACT | mjDSBL_CONSTRAINT)) return 0;
  if (!c->d0) {
    c->d0 = mj_makeData(m);
    if (!c->d0) return fail(c, "out of memory (mjData)");
    mj_kinematics(m, c->d0);
  }
  enum { MAXP = 4096 };
  mjtNum(*P)[3] = malloc(sizeof(mjtNum[3]) * MAXP);
  if (!P) return fail(c, "out of memory");
  for (int g = 0; g < m->ngeom; g++) {
    int b = m->geom_bodyid[g], t = m->geom_type[g];
    if (m->body_weldid[b] == 0 || t == mjGEOM_PLANE || t == mjGEOM_HFIELD || t == mjGEOM_SDF) continue;
    if (m->geom_contype[g] == 0 && m->geom_conaffinity[g] == 0) continue; /* visual */
    if (M->nsc == BCG_MAX_SC) { M->sc_dropped++; continue; }
    const mjtNum *gp = m->geom_pos + 3 * g, *gq = m->geom_quat + 4 * g, *sz = m->geom_size + 3 * g;
    mjtNum a[3], e[3], r = sz[0];
    int n = 0, k = M->nsc;
    if (t == mjGEOM_SPHERE) {
      mju_copy3(a, gp), mju_copy3(e, gp);
    } else if (t == mjGEOM_CAPSULE) { /* as its two contact-point slots */
      for (int s = -1; s <= 1; s += 2) {
        mjtNum h[3] = {0, 0, s * sz[1]};
        quat_rot(gq, h, s < 0 ? a : e);
        mju_addTo3(s < 0 ? a : e, gp);
      }
    } else {
      if (t == mjGEOM_BOX)
        for (int q = 0; q < 8; q++, n++)
          P[n][0] = (q & 1 ? 1 : -1) * sz[0], P[n][1] = (q & 2 ? 1 : -1) * sz[1], P[n][2] = (q & 4 ? 1 : -1) * sz[2];
      else if (t == mjGEOM_ELLIPSOID)
        for (int q = 0; q < 6; q++, n++) {
          mju_zero3(P[n]);
          P[n][q / 2] = (q & 1 ? 1 : -1) * sz[q / 2];
        }
      else if (t == mjGEOM_CYLINDER)
        for (int s = -1; s <= 1; s += 2)
          for (int q = 0; q < CYL_RIM; q++, n++)
            P[n][0] = sz[0] * cos(2 * mjPI * q / CYL_RIM), P[n][1] = sz[0] * sin(2 * mjPI * q / CYL_RIM),
            P[n][2] = s * sz[1];
      else if (t == mjGEOM_MESH && m->geom_dataid[g] >= 0) {
        int mesh = m->geom_dataid[g], nh = m->mesh_vertnum[mesh];
        const float *V = m->mesh_vert + 3 * (size_t)m->mesh_vertadr[mesh];
        const int *ids = NULL;
        if (m->mesh_graphadr[mesh] >= 0) {
          const int *gr = m->mesh_graph + m->mesh_graphadr[mesh];
          nh = gr[0];
          ids = gr + 2 + nh;
        }
        /* a large hull: every (nh / MAXP + 1)-th vertex */
        int step = nh / MAXP + 1;
        for (int q = 0; q < nh && n < MAXP; q += step, n++)
          for (int i = 0; i < 3; i++) P[n][i] = V[3 * (ids ? ids[q] : q) + i];
      }
      if (n == 0) { /* nothing to fit (an unknown type, an empty mesh): the bounding sphere */
        mju_copy3(a, gp), mju_copy3(e, gp);
        r = m->geom_rbound[g];
      } else {
        mjtNum la[3], le[3];
        fit_capsule((const mjtNum(*)[3])P, n, la, le, &r);
        quat_rot(gq, la, a), mju_addTo3(a, gp);
        quat_rot(gq, le, e), mju_addTo3(e, gp);
      }
      M->sc_fitted[k] = 1;
    }
    M->sc_body[k] = b, M->sc_geom[k] = g, M->sc_r[k] = (bcg_real)r;
    for (int i = 0; i < 3; i++) M->sc_a[k][i] = (bcg_real)a[i], M->sc_c[k][i] = (bcg_real)e[i];
    M->nsc++;
  }
  free(P);
  for (int x = 0; x < M->nsc; x++)
    for (int y = x + 1; y < M->nsc; y++) {
      if (!self_pair_ok(m, M->sc_geom[x], M->sc_geom[y])) continue;
      if (M->sc_fitted[x] || M->sc_fitted[y]) { /* overlapping at qpos0: an artefact of the fit */
        mjtNum W[4][3];
        const int ks[2] = {x, y};
        for (int u = 0; u < 2; u++) {
          int bb = M->sc_body[ks[u]];
          for (int v = 0; v < 2; v++) {
            mjtNum l[3] = {v ? M->sc_c[ks[u]][0] : M->sc_a[ks[u]][0], v ? M->sc_c[ks[u]][1] : M->sc_a[ks[u]][1],
                           v ? M->sc_c[ks[u]][2] : M->sc_a[ks[u]][2]};
            mju_mulMatVec3(W[2 * u + v], c->d0->xmat + 9 * bb, l);
            mju_addTo3(W[2 * u + v], c->d0->xpos + 3 * bb);
          }
        }
        if (seg_dist((const mjtNum(*)[3])W) < M->sc_r[x] + M->sc_r[y]) { M->sc_rest_pairs++; continue; }
      }
      M->sc_pair[M->nsc_pair][0] = (short)x, M->sc_pair[M->nsc_pair][1] = (short)y, M->nsc_pair++;
    }
  return 0;
}

/* MuJoCo's messages may span lines (and quote the file's text); make them
 * one line. */
static void one_line(char *s) {
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) s[--n] = 0;
  for (char *p = s; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
    else if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
}

void bcg_model_opts_default(bcg_model_opts *o) {
  memset(o, 0, sizeof *o);
  o->mesh_points = 6;
}

bcg_model *bcg_model_load(const char *path, char *err, size_t errlen) {
  bcg_model_opts o;
  bcg_model_opts_default(&o);
  return bcg_model_load_opts(path, &o, err, errlen);
}

bcg_model *bcg_model_load_opts(const char *path, bcg_model_opts *opts, char *err, size_t errlen) {
  if (err && errlen) err[0] = 0;
  opts->failed_key[0] = 0;
  if (!path || !path[0]) {
    if (err && errlen) snprintf(err, errlen, "model: empty path");
    return NULL;
  }
  if (strlen(path) >= sizeof(((bcg_model *)0)->path)) {
    if (err && errlen) snprintf(err, errlen, "%.200s...: model path too long", path);
    return NULL;
  }
  if (mj_version() != mjVERSION_HEADER) {
    if (err && errlen)
      snprintf(err, errlen, "%s: the libmujoco loaded is version %d, bcg was built against %d (the libmujoco.so "
               "next to libbcg.so is the one it needs)", path, mj_version(), mjVERSION_HEADER);
    return NULL;
  }
  FILE *probe = fopen(path, "r");
  if (!probe) {
    if (err && errlen) snprintf(err, errlen, "%s: cannot open model file: %s", path, strerror(errno));
    return NULL;
  }
  fclose(probe);
  char mjerr[1000] = "";
  mjModel *mj = mj_loadXML(path, NULL, mjerr, sizeof mjerr);
  if (!mj) {
    one_line(mjerr);
    if (err && errlen) snprintf(err, errlen, "%s: cannot load model: %s", path, mjerr[0] ? mjerr : "unknown error");
    return NULL;
  }
  bcg_model *model = calloc(1, sizeof *model);
  if (!model) {
    mj_deleteModel(mj);
    if (err && errlen) snprintf(err, errlen, "%s: out of memory", path);
    return NULL;
  }
  snprintf(model->path, sizeof model->path, "%s", path);
  model->mj = mj;
  conv c = {mj, model, path, err, errlen, opts, NULL, {0}};
  bcg_mdata *d = &model->m;
  d->timestep = (bcg_real)mj->opt.timestep;
  for (int i = 0; i < 3; i++)
    d->gravity[i] = (mj->opt.disableflags & mjDSBL_GRAVITY) ? 0 : (bcg_real)mj->opt.gravity[i];
  int bad = convert_capacity(&c) || convert_unsupported(&c) || convert_bodies(&c) || convert_joints(&c) ||
            convert_actuators(&c) || convert_contacts(&c) || convert_self(&c);
  if (c.d0) mj_deleteData(c.d0);
  if (bad) {
    bcg_model_free(model);
    return NULL;
  }
  return model;
}

void bcg_model_free(bcg_model *model) {
  if (!model) return;
  if (model->mj) mj_deleteModel((mjModel *)model->mj);
  free(model);
}

const char *bcg_model_default_path(void) {
  const char *e = getenv("BCG_MODEL");
  return e && e[0] ? e : DEFAULT_MODEL;
}

double bcg_model_weight(const bcg_mdata *m, double *mass) {
  double M = 0;
  for (int b = 1; b < m->nbody; b++) M += m->body_mass[b];
  if (mass) *mass = M;
  return M * sqrt((double)m->gravity[0] * m->gravity[0] + (double)m->gravity[1] * m->gravity[1] +
                  (double)m->gravity[2] * m->gravity[2]);
}

int bcg_model_body_id(const bcg_model *model, const char *name) {
  if (!model || !name) return -1;
  if (model->mj) return mj_name2id((const mjModel *)model->mj, mjOBJ_BODY, name);
  for (int b = 0; b < model->m.nbody; b++)
    if (strcmp(model->body_name[b], name) == 0) return b;
  return -1;
}
