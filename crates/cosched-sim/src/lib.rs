//! Discrete-event simulator and performance model driving cosched policies.
