// Typed errors thrown across layer boundaries (STYLE.md "Error handling").
// cli/main.cpp is the one catch site that maps them to exit codes: 2 for bad input, 1 for runtime.
#pragma once

#include <stdexcept>
#include <string>

namespace llmt {

// Base of every error llmtrain throws on purpose. `what()` is a complete, user-facing message.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Bad input from the user: config, arguments, data files, checkpoints given on the command line.
// Maps to exit code 2 (and HTTP 400 in the server).
class InputError : public Error {
public:
    using Error::Error;
};

// A config value or file that failed validation; the message names key paths and locations.
class ConfigError : public InputError {
public:
    using InputError::InputError;
};

// Command-line usage errors (unknown flag, missing argument).
class UsageError : public InputError {
public:
    using InputError::InputError;
};

// A data or checkpoint file that does not have the expected format: names the file and offset.
class FormatError : public InputError {
public:
    using InputError::InputError;
};

// Operating-system failures: open/read/write/rename/fsync. The message holds the path and errno text.
class IoError : public Error {
public:
    using Error::Error;
};

// A checkpoint that is missing, corrupt or belongs to another model: bad input named by the user
// (--resume, --checkpoint, model.init_from), so exit code 2.
class CheckpointError : public InputError {
public:
    using InputError::InputError;
};

// Distributed failures; DistTimeout when a peer did not answer within the timeout.
class DistError : public Error {
public:
    using Error::Error;
};
class DistTimeout : public DistError {
public:
    using DistError::DistError;
};

// A device runtime (CUDA, cuBLAS, NCCL) reported an error, or a device is not available.
class DeviceError : public Error {
public:
    using Error::Error;
};

// A broken internal invariant: a shape, size or state that the engine itself must get right (an ops.h
// precondition the model code violated, an arena view asked for before allocation). A bug or a device
// fault, never the user's input: exit code 1, so a scheduler may retry it, and the message says
// "internal error" so that it is reported. Thrown by LLMT_INTERNAL_CHECK (core/check.h).
class InternalError : public Error {
public:
    // what() is "internal error: " + msg.
    explicit InternalError(const std::string& msg) : Error("internal error: " + msg) {}
};

// The operation was cancelled (signal, user request).
class Cancelled : public Error {
public:
    using Error::Error;
};

}  // namespace llmt
