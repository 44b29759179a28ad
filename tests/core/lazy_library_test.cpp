// LazyLibrary (core/lazy_library.h): a present library resolves symbols; an absent one is reported, at the
// first symbol, with every candidate tried and the install hint, and never at construction.
#include "core/lazy_library.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace llmt {
namespace {

TEST(LazyLibrary, ResolvesAPresentLibrary) {
    const LazyLibrary libm({"libm.so.6"}, "libm", "part of glibc");
    EXPECT_TRUE(libm.available());
    auto fn = reinterpret_cast<double (*)(double)>(libm.symbol("sqrt"));
    EXPECT_DOUBLE_EQ(fn(16.0), 4.0);
    try {
        libm.symbol("llmt_no_such_symbol");
        FAIL() << "resolved a missing symbol";
    } catch (const DeviceError& e) {
        EXPECT_NE(std::string(e.what()).find("llmt_no_such_symbol"), std::string::npos) << e.what();
    }
}

TEST(LazyLibrary, AbsentLibraryFailsAtFirstUseNamingWhatWasTried) {
    const LazyLibrary lib({"libllmt_absent.so.1", "/nonexistent/libllmt_absent.so.1"}, "Absent 1", "install absent");
    EXPECT_FALSE(lib.available());
    try {
        lib.symbol("anything");
        FAIL() << "no error for an absent library";
    } catch (const DeviceError& e) {
        const std::string m = e.what();
        for (const char* part :
             {"Absent 1", "libllmt_absent.so.1", "/nonexistent/libllmt_absent.so.1", "install absent"})
            EXPECT_NE(m.find(part), std::string::npos) << part << " missing from: " << m;
    }
}

}  // namespace
}  // namespace llmt
