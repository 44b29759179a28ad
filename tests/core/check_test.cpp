// The two kinds of check (core/check.h): user input -> InputError (exit 2, not retried by the control
// plane's scheduler); an engine invariant -> InternalError (exit 1, retried), never an InputError.
#include "core/check.h"

#include <gtest/gtest.h>

namespace llmt {
namespace {

void input_check(int v) { LLMT_CHECK(v > 0, "trainer.max_steps: expected > 0, got {}", v); }
void internal_check(int v) { LLMT_INTERNAL_CHECK(v > 0, "matmul: inner sizes {} and {} differ", v, 3); }

TEST(Check, InputChecksThrowInputError) {
    EXPECT_NO_THROW(input_check(1));
    EXPECT_THROW(input_check(0), InputError);
}

TEST(Check, InternalChecksThrowInternalErrorThatIsNotInputError) {
    EXPECT_NO_THROW(internal_check(1));
    try {
        internal_check(0);
        FAIL() << "no throw";
    } catch (const InputError& e) {
        FAIL() << "an internal invariant was reported as bad input: " << e.what();
    } catch (const InternalError& e) {
        EXPECT_STREQ(e.what(), "internal error: matmul: inner sizes 0 and 3 differ");
    }
}

}  // namespace
}  // namespace llmt
