/* Student's t tail and quantile (suites/engine/stats_tests.c stat_t_sf2, stat_t_quantile) against
 * published table values (two-sided 95 %, 99 %, 99.9 %), the closed forms at df 1 (Cauchy: the
 * q-quantile is tan(pi (q - 1/2))) and df 2 (t = (2q-1) sqrt(2 / (1 - (2q-1)^2))), the normal limit
 * at large df, and the round trip tail(quantile(q)) = 2 (1 - q) at the small tails a family-wise
 * interval asks for (q = 1 - 0.05 / 200). */
#include <math.h>

#include "suites/engine/stats_tests.h"
#include "tests/harness.h"

static void near(double got, double want, double rel, const char *what) {
  CHECK(fabs(got - want) <= rel * fabs(want), "%s: got %.6f, want %.6f", what, got, want);
}

int main(void) {
  /* table values, 3-4 significant digits as printed */
  near(stat_t_quantile(0.975, 1), 12.706, 1e-4, "t(0.975, 1)");
  near(stat_t_quantile(0.975, 5), 2.5706, 1e-4, "t(0.975, 5)");
  near(stat_t_quantile(0.975, 30), 2.0423, 1e-4, "t(0.975, 30)");
  near(stat_t_quantile(0.995, 10), 3.1693, 1e-4, "t(0.995, 10)");
  near(stat_t_quantile(0.9995, 10), 4.5869, 1e-4, "t(0.9995, 10)");
  near(stat_t_quantile(0.9995, 3), 12.924, 1e-4, "t(0.9995, 3)");
  /* closed forms */
  for (double q = 0.6; q < 0.99999; q = 1 - (1 - q) / 3) {
    near(stat_t_quantile(q, 1), tan(M_PI * (q - 0.5)), 1e-8, "df 1 (Cauchy)");
    const double a = 2 * q - 1;
    near(stat_t_quantile(q, 2), a * sqrt(2 / (1 - a * a)), 1e-8, "df 2");
  }
  near(stat_t_quantile(0.975, 1e6), 1.959964, 1e-5, "normal limit");
  /* round trip at small tails */
  const double qs[] = {0.975, 0.99975, 1 - 0.05 / 400};
  for (int i = 0; i < 3; i++)
    for (int df = 1; df <= 40; df += 3) {
      const double t = stat_t_quantile(qs[i], df);
      near(stat_t_sf2(t, df), 2 * (1 - qs[i]), 1e-6, "tail(quantile)");
    }
  CHECK(stat_t_sf2(0, 4) == 1.0 && stat_t_sf2(INFINITY, 4) == 0.0 && isnan(stat_t_sf2(NAN, 4)), "tail edges");
  CHECK(isnan(stat_t_quantile(0.5, 3)) && isnan(stat_t_quantile(1.0, 3)) && isnan(stat_t_quantile(0.9, 0.5)), "range");
  return test_finish();
}
