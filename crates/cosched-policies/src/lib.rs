//! Scheduling policies: baselines (UE, BP, EQ) and the seed papers' TA, TACO, Gang, CaSAS, DI, Scalpel.
