/* distributed/ps_rules.h - internal: the model's own update rules for the PS, read from its train op.
 *
 * The train op a model_fn builds (train/optimizers.c: one Apply* / SparseApply* op per variable, Adam's
 * beta-power updates, the global-step increment) is inspected, not run: each apply op gives its
 * variable's optimizer, hyperparameters, learning rate (a constant, or a LearningRateSchedule of the
 * global step, which the PS then evaluates at each variable's step) and the gradient it consumes (after
 * whatever the model did to it: clipping, scaling), which the trainer fetches and pushes. Anything in the
 * train op that the PS cannot reproduce (an apply op without a PS counterpart, a learning rate computed
 * from something other than constants and the global step, an assignment to a trainable variable, two
 * updates of one variable) is INVALID_ARGUMENT naming the op and
 * the variable. Assignments to variables the PS does not hold (non-trainable state) are the trainer's
 * (loom__ps_rules_local_updates). */
#ifndef LOOM_DIST_PS_RULES_H
#define LOOM_DIST_PS_RULES_H
#include "loom/loom.h"
#include "loom/loom_autodiff.h"
#include "loom/loom_distributed.h"

typedef struct loom_ps_rules loom_ps_rules;

/* Reads the update rule of every variable of p from train_op (a node of g); global_step: g's global step
 * variable (the only variable a schedule may read, and the only one besides Adam's beta powers an
 * assignment may update). p is borrowed and must outlive the rules. */
loom_ps_rules *loom__ps_rules_new(loom_graph *g, loom_node *train_op, loom_variable *global_step,
                                  const loom_ps_placement *p, loom_status *st);
void loom__ps_rules_free(loom_ps_rules *r);
/* The gradient each variable's apply op consumes (grads[var].values.node NULL: the train op does not
 * update that variable); grads has one entry per variable of the placement. */
void loom__ps_rules_gradients(const loom_ps_rules *r, loom_gradient *grads);
/* Evaluates the constants of the rules (learning rates, hyperparameters, slot initial values, Adam's beta
 * powers, the global step) in s, a session of the graph. */
loom_code loom__ps_rules_eval(loom_ps_rules *r, loom_session *s, loom_status *st);
/* Variable var's slot variables in the graph (slots[0..n), n returned; the PS's slots in the same order)
 * and Adam's beta power variables (NULL when its rule has none). */
int loom__ps_rules_slots(const loom_ps_rules *r, int var, loom_variable **slots, loom_variable **beta1_power,
                         loom_variable **beta2_power);
/* The train op's assignments to variables the PS does not hold (non-trainable state: batch norm's moving
 * averages), which the trainer runs itself each step (each trainer its own; the chief's are checkpointed). */
int loom__ps_rules_local_updates(const loom_ps_rules *r, loom_node *const **nodes);

/* The input positions of an apply op's gradient (and of its indices, -1 for a dense apply op); 0 when op
 * is not an optimizer op (those the PS has no counterpart for included: ProximalGradientDescent,
 * ProximalAdagrad, AdagradDA). */
int loom__apply_op_grad_inputs(const char *op, int *grad, int *indices);
/* Variable var's rule (after loom__ps_rules_eval); NULL when the train op does not update it. */
const loom_ps_update_rule *loom__ps_rules_get(const loom_ps_rules *r, int var);

#endif
