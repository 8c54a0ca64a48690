/* The one policy constant behind the noise-floor bounds (docs/verdicts.md).
 *
 * Where a check has a floor (a second correct computation of the same rows: the bf16 reference
 * engine against fp32, or fp32 against the bf16 engine), a path passes when its error against
 * fp32 is at most VOUCH_ACCURACY_RATIO times the floor's. Every bound follows from that by the
 * triangle inequality: logits within k x (or, measured against a bf16 reference, (k+1) x) the
 * floor's error, KLD within the square of that factor (KLD grows with the square of a small logit
 * error), total variation within the factor itself. k = 2: an optimization may round differently
 * from the unoptimized engine, not be much less accurate than it. */
#ifndef VOUCH_SUITES_ENGINE_BOUNDS_H
#define VOUCH_SUITES_ENGINE_BOUNDS_H

#define VOUCH_ACCURACY_RATIO 2.0

#endif
