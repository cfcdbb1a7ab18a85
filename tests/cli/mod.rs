//! The command line as a person or an agent meets it: commands, exit codes, JSON, set-up.

mod agent_driver;
mod conventions;
mod experiment_command;
mod gate;
mod init;
mod json_schema;
mod quiet_and_verbose;
mod rust_version;
mod setup;
mod status;
mod typos_and_global_options;
