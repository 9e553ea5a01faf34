//! The commands that talk to a running daemon through its socket, and what they share.

pub mod attach;
pub mod cancel;
mod common;
pub mod hold;
mod job_args;
mod job_filter;
mod job_ids;
mod job_table;
pub mod jobs;
mod log_file;
pub mod logs;
pub mod policy;
mod sbatch;
pub mod show;
mod slurm_time;
pub mod submit;
mod terminal;
pub mod wait;
