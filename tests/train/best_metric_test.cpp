// BestMetric (train/best_metric.h): the one rule that keeps checkpoints/best, for a metric that falls (a
// loss) and one that rises (an accuracy), and its round trip through state.json.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "train/best_metric.h"

namespace {

using llmt::train::BestMetric;

TEST(BestMetric, LowerIsBetterForALoss) {
    BestMetric m("val_loss", /*higher_is_better=*/false);
    EXPECT_EQ(m.key(), "best_val_loss");
    EXPECT_TRUE(m.to_json().is_null());
    EXPECT_TRUE(m.offer(2.5));  // the first finite value is the best
    EXPECT_FALSE(m.offer(3.0));
    EXPECT_FALSE(m.offer(2.5));  // a tie does not improve
    EXPECT_TRUE(m.offer(1.0));
    EXPECT_EQ(m.value().value_or(-1), 1.0);
}

TEST(BestMetric, HigherIsBetterForAnAccuracy) {
    BestMetric m("val_accuracy", /*higher_is_better=*/true);
    EXPECT_EQ(m.key(), "best_val_accuracy");
    EXPECT_TRUE(m.offer(0.0));  // an accuracy of 0 is still a value
    EXPECT_TRUE(m.offer(0.6));
    EXPECT_FALSE(m.offer(0.5));
    EXPECT_EQ(m.to_json(), 0.6);
}

TEST(BestMetric, ValuesThatAreNotFiniteNeverCount) {
    BestMetric m("val_loss", false);
    EXPECT_FALSE(m.offer(std::nan("")));  // an accuracy over no images, a diverged loss
    EXPECT_FALSE(m.offer(std::numeric_limits<double>::infinity()));
    EXPECT_FALSE(m.value().has_value());
    EXPECT_TRUE(m.offer(4.0));
    EXPECT_FALSE(m.offer(-std::numeric_limits<double>::infinity()));
    EXPECT_EQ(m.value().value_or(-1), 4.0);
}

TEST(BestMetric, RestoresFromStateJson) {
    BestMetric m("val_accuracy", true);
    m.restore({{"step", 10}, {"best_val_accuracy", 0.75}}, "state.json");
    EXPECT_EQ(m.value().value_or(-1), 0.75);
    EXPECT_FALSE(m.offer(0.7));  // the resumed run keeps the whole run's best
    EXPECT_TRUE(m.offer(0.8));
    m.restore({{"step", 10}, {"best_val_accuracy", nullptr}}, "state.json");
    EXPECT_FALSE(m.value().has_value());
    m.restore({{"step", 10}}, "state.json");  // a language model's checkpoint has no such field
    EXPECT_FALSE(m.value().has_value());
}

TEST(BestMetric, RefusesAFieldThatIsNotANumberNamingFileAndField) {
    BestMetric m("val_loss", false);
    try {
        m.restore({{"best_val_loss", "low"}}, "run/checkpoints/step_4/state.json");
        FAIL() << "no error";
    } catch (const llmt::CheckpointError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("run/checkpoints/step_4/state.json"), std::string::npos) << what;
        EXPECT_NE(what.find("\"best_val_loss\" must be a number or null, found string"), std::string::npos) << what;
    }
}

}  // namespace
