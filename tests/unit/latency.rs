//! Unit tests of `blis_cosim::latency`.

mod collective;
mod host;
mod memo;
mod pim;
mod placement;
mod profile;
mod roofline;

mod error_tests {
    use blis_cosim::astra::{AstraError, Fault, ProtocolError, Stage};
    use blis_cosim::latency::LatencyError;

    #[test]
    fn an_instance_label_keeps_astra_sims_error_typed() {
        let astra = AstraError {
            binary: "astra_sim".into(),
            stage: Stage::Step { step: 3, batch: 1 },
            fault: Fault::Protocol(ProtocolError::UnaskedShutdown),
            last_lines: Vec::new(),
        };
        let e = LatencyError::from(astra).of("instance 1");
        let kept = e.astra().expect("ASTRA-Sim's error is kept");
        assert_eq!(kept.stage, Stage::Step { step: 3, batch: 1 });
        assert!(matches!(kept.fault, Fault::Protocol(_)));
        assert!(
            e.to_string()
                .starts_with("instance 1: ASTRA-Sim `astra_sim` at step 3")
        );
        assert!(LatencyError::ZeroStep.of("instance 0").astra().is_none());
    }
}

/// Each typed latency error prints the message it printed as text.
mod message_tests {
    use blis_cosim::astra::{NoStageFinish, StepError};
    use blis_cosim::chakra::{BreakdownError, TraceError};
    use blis_cosim::latency::LatencyError as E;

    #[test]
    fn latency_errors_print_their_messages() {
        let anyhow = anyhow::anyhow!("cannot read x").context("instance 0");
        let trace = || TraceError::Breakdown(BreakdownError::NoComputeLayers);
        let cases: Vec<(E, &str)> = vec![
            (
                E::EmptyBatch {
                    backend: "roofline",
                },
                "roofline: empty batch",
            ),
            (
                E::NoTokens {
                    backend: "profile",
                    item: 3,
                },
                "profile: batch item 3 computes no tokens",
            ),
            (E::ZeroStep, "backend priced a step at 0 ns"),
            (E::ZeroWave, "a wave priced at 0 ns"),
            (
                E::WaveTimes {
                    members: 2,
                    priced: vec![5, 0],
                },
                "a wave of 2 members priced as [5, 0]",
            ),
            (
                E::CannotSplit { backend: "profile" },
                "the profile backend cannot split a step into pipeline stages (pp_size > 1)",
            ),
            (
                E::NoPimChannel,
                "PIM: the node's cpu_mem holds no whole PIM channel (mem_size is smaller than \
                 one channel)",
            ),
            (
                E::NoPimLayer {
                    backend: "roofline",
                },
                "PIM: the roofline backend's step has no attention or o_proj layer to offload",
            ),
            (
                E::LayerRepeats {
                    layer: "mlp",
                    repeats: 3,
                    blocks: 32,
                },
                "placement: layer mlp runs 3 times a step, expected 1 or 32",
            ),
            (
                E::BlockAfterHead { layer: "mlp" },
                "placement: transformer-block layer mlp after the head",
            ),
            (E::Start(anyhow), "instance 0: cannot read x"),
            (
                StepError::Trace {
                    step: Some(4),
                    error: trace(),
                }
                .into(),
                "ASTRA-Sim trace of step 4: latency breakdown: no compute layers",
            ),
            (
                StepError::Trace {
                    step: None,
                    error: trace(),
                }
                .into(),
                "ASTRA-Sim trace: latency breakdown: no compute layers",
            ),
            (
                StepError::BelowCompute {
                    step: 4,
                    time: 10,
                    compute: 12,
                }
                .into(),
                "ASTRA-Sim priced step 4 at 10 ns, less than its 12 ns of COMP nodes in a chain",
            ),
            (
                StepError::Unpriced.into(),
                "ASTRA-Sim has not priced this batch",
            ),
            (
                StepError::Stages {
                    started: vec![16, 16],
                    asked: vec![32],
                }
                .into(),
                "ASTRA-Sim was started for pipeline stages of [16, 16] blocks, asked for [32]",
            ),
            (
                StepError::StageFinish {
                    step: 4,
                    error: NoStageFinish { stage: 1 },
                }
                .into(),
                "ASTRA-Sim, step 4: ASTRA-Sim did not report the finish of stage 1",
            ),
        ];
        for (error, expected) in cases {
            assert_eq!(error.to_string(), expected);
            assert!(
                std::error::Error::source(&error).is_none(),
                "the cause is in the message: {expected}"
            );
        }
    }
}

mod wrapper_tests {
    use blis_cosim::Nanos;
    use blis_cosim::latency::*;

    /// A compute backend of one layer, 10 ns a token, that streams 7 weight bytes.
    struct Leaf;

    impl LatencyBackend for Leaf {
        fn name(&self) -> &'static str {
            "leaf"
        }

        fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
            Ok(10 * batch.total_tokens())
        }

        fn layer_times(
            &mut self,
            batch: &BatchDesc<'_>,
            out: &mut Vec<LayerTiming>,
        ) -> Result<(), LatencyError> {
            crate::cluster_fixture::whole_step(self.step_time(batch)?, out);
            Ok(())
        }

        fn streamed_weight_bytes(&self) -> u64 {
            7
        }
    }

    /// A wrapper that adds 5 ns to every step and writes nothing else.
    struct Slower(Box<dyn LatencyBackend>);

    impl LatencyBackend for Slower {
        fn name(&self) -> &'static str {
            "slower"
        }

        fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
            Ok(self.0.step_time(batch)? + 5)
        }

        fn layer_times(
            &mut self,
            batch: &BatchDesc<'_>,
            out: &mut Vec<LayerTiming>,
        ) -> Result<(), LatencyError> {
            self.0.layer_times(batch, out)?;
            out.push(LayerTiming {
                name: "slower",
                repeats: 1,
                time_ns: 5,
                is_comm: true,
            });
            Ok(())
        }

        fn inner(&self) -> Option<&dyn LatencyBackend> {
            Some(&*self.0)
        }

        fn inner_mut(&mut self) -> Option<&mut dyn LatencyBackend> {
            Some(&mut *self.0)
        }
    }

    #[test]
    fn a_wrapper_passes_reports_on_and_prices_nothing_it_did_not_say() {
        let items = [BatchItem {
            new_tokens: 3,
            context_tokens: 0,
        }];
        let batch = BatchDesc::new(&items);
        let mut b = Slower(Box::new(Leaf));
        let layers = b.breakdown(&batch).unwrap();
        let sum: Nanos = layers.iter().map(|l| l.repeats * l.time_ns).sum();
        assert_eq!(sum, b.step_time(&batch).unwrap());
        assert_eq!(layers.len(), 2);
        assert_eq!(b.streamed_weight_bytes(), 7, "passed on from the leaf");
        assert_eq!(b.pim_activity(), PimActivity::default());
        assert!(b.profile_lookups().is_none());
        let refused = b.step_parts(&batch).unwrap_err().to_string();
        assert!(refused.contains("slower backend cannot split"), "{refused}");
    }
}
