//! Unit tests of the parent module.

use super::*;

#[test]
fn parses_bytes_with_units() {
    assert_eq!(parse_budget("1000"), Ok(Budget::Bytes(1000)));
    assert_eq!(parse_budget("512MiB"), Ok(Budget::Bytes(512 << 20)));
    assert_eq!(parse_budget(" 12 GiB "), Ok(Budget::Bytes(12 << 30)));
    assert_eq!(parse_budget("1.5GB"), Ok(Budget::Bytes(1_500_000_000)));
    assert_eq!(parse_budget("64k"), Ok(Budget::Bytes(64 << 10)));
    assert_eq!(parse_budget("2_048b"), Ok(Budget::Bytes(2048)));
}

#[test]
fn parses_fractions() {
    assert_eq!(parse_budget("0.4"), Ok(Budget::DeviceFraction(0.4)));
    assert_eq!(parse_budget("40%"), Ok(Budget::DeviceFraction(0.4)));
    assert_eq!(parse_budget("1.0"), Ok(Budget::DeviceFraction(1.0)));
}

#[test]
fn rejects_malformed_budgets() {
    for bad in [
        "", "abc", "12XB", "1.5.3", "0", "0.0", "1.5", "150%", "-3", "GiB", "nan",
    ] {
        assert!(parse_budget(bad).is_err(), "{bad:?} should be rejected");
    }
}

#[test]
fn env_errors_name_variable_and_value() {
    let err = SwapConfig::default()
        .with_vars(|name| (name == "BURN_SWAP_BUDGET").then(|| "12GX".to_string()))
        .unwrap_err();
    match &err {
        ConfigError::InvalidEnv {
            variable, value, ..
        } => {
            assert_eq!(*variable, "BURN_SWAP_BUDGET");
            assert_eq!(value, "12GX");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("BURN_SWAP_BUDGET"));
    assert!(err.to_string().contains("12GX"));

    for (var, value) in [
        ("BURN_SWAP", "maybe"),
        ("BURN_SWAP_POLICY", "greedy"),
        ("BURN_SWAP_EVICTION", "random"),
        ("BURN_SWAP_TRACE", "2"),
        ("BURN_SWAP_COMPRESS", "maybe"),
        ("BURN_SWAP_COMPRESS", "on:1.5"),
        ("BURN_SWAP_COMPRESS", "on:x"),
        ("BURN_SWAP_JITTER", "-5"),
        ("BURN_SWAP_PEERS", "256MiB"),
        ("BURN_SWAP_PEERS", "0@50GB/s"),
        ("BURN_SWAP_PEERS", "256MiB@fast"),
        ("BURN_SWAP_PEERS", "256MiB@50XB/s"),
        ("BURN_SWAP_PEERS", "0.5@50GB/s"),
        ("BURN_SWAP_JITTER", "300us"),
        ("BURN_SWAP_HOST_BUDGET", "0.5"),
        ("BURN_SWAP_HOST_BUDGET", "lots"),
    ] {
        let err = SwapConfig::default()
            .with_vars(|name| (name == var).then(|| value.to_string()))
            .unwrap_err();
        assert!(
            matches!(&err, ConfigError::InvalidEnv { variable, value: v, .. } if *variable == var && v == value),
            "{var}={value}: {err:?}"
        );
    }
}

#[test]
fn env_overrides_fields() {
    let config = SwapConfig::default()
        .with_vars(|name| match name {
            "BURN_SWAP" => Some("off".into()),
            "BURN_SWAP_BUDGET" => Some("256MiB".into()),
            "BURN_SWAP_EVICTION" => Some("LRU".into()),
            "BURN_SWAP_POLICY" => Some("Offload_Only".into()),
            "BURN_SWAP_COMPRESS" => Some("auto:0.5".into()),
            "BURN_SWAP_TRACE" => Some("0".into()),
            "BURN_SWAP_JITTER" => Some(" 250 ".into()),
            "BURN_SWAP_PEERS" => Some("256MiB@50GB/s, 1GiB@12.5GiB".into()),
            "BURN_SWAP_HOST_BUDGET" => Some("8GiB".into()),
            _ => None,
        })
        .unwrap();
    assert!(!config.enabled);
    assert_eq!(config.budget, Budget::Bytes(256 << 20));
    assert_eq!(config.eviction, EvictionScore::Lru);
    assert_eq!(config.policy, Policy::OffloadOnly);
    assert_eq!(config.compression, Compression::Auto { max_ratio: 0.5 });
    assert_eq!(config.transfer_jitter_micros, 250);
    assert_eq!(config.host_budget, Some(8 << 30));
    assert_eq!(
        SwapConfig::default().with_host_budget(0).validate(),
        Err(ConfigError::ZeroHostBudget)
    );
    let unlimited = SwapConfig::default()
        .with_host_budget(1 << 20)
        .with_vars(|name| (name == "BURN_SWAP_HOST_BUDGET").then(|| "unlimited".into()))
        .unwrap();
    assert_eq!(unlimited.host_budget, None);
    assert_eq!(
        config.peers,
        vec![
            PeerSpec::simulated("peer0", 256 << 20, 50e9),
            PeerSpec::simulated("peer1", 1 << 30, 12.5 * (1u64 << 30) as f64),
        ]
    );
    assert_eq!(parse_peers("off"), Ok(vec![]));
    assert_eq!(
        parse_peers("cuda:1@8GiB, cuda:0@1G"),
        Ok(vec![PeerSpec::cuda(1, 8 << 30), PeerSpec::cuda(0, 1 << 30)])
    );
    assert!(parse_peers("cuda:x@8GiB").is_err());
    assert_eq!(
        parse_peers("device:2@1MiB"),
        Ok(vec![PeerSpec::device(2, 1 << 20)])
    );
    assert_eq!(
        parse_compression("ON"),
        Ok(Compression::On { max_ratio: 0.8 })
    );
    assert_eq!(parse_compression("off"), Ok(Compression::Off));
    assert_eq!(
        SwapConfig::default()
            .with_compression(Compression::On { max_ratio: 0.0 })
            .validate(),
        Err(ConfigError::CompressionRatio(0.0))
    );
    assert!(!config.trace);
    for policy in Policy::ALL {
        assert_eq!(policy.name().parse(), Ok(policy));
    }
}

#[test]
fn fraction_needs_known_device_memory() {
    let budget = Budget::DeviceFraction(0.25);
    assert_eq!(budget.resolve(Some(1000), "x"), Ok(Some(250)));
    assert!(matches!(
        budget.resolve(None, "flex"),
        Err(ConfigError::DeviceMemoryUnknown { .. })
    ));
    assert_eq!(
        Budget::Bytes(0).resolve(None, "x"),
        Err(ConfigError::ZeroBudget)
    );
    assert_eq!(
        SwapConfig::budget_fraction(1.5).validate(),
        Err(ConfigError::FractionOutOfRange(1.5))
    );
}

#[test]
fn a_planner_the_policy_rules_out_is_refused_by_name() {
    use crate::config::Planner;
    for (planner, policy) in [
        (Planner::Segments, Policy::RecomputeOnly),
        (Planner::Checkpoints, Policy::OffloadOnly),
    ] {
        let config = SwapConfig::default()
            .with_policy(policy)
            .with_planner(planner);
        let error = config.validate().unwrap_err();
        assert_eq!(
            error,
            ConfigError::PlannerOutsidePolicy {
                planner: planner.name(),
                policy: policy.name()
            }
        );
        let message = error.to_string();
        assert!(message.contains(planner.name()) && message.contains(policy.name()));
    }
    for planner in [Planner::Combined, Planner::Checkpoints, Planner::Segments] {
        let config = SwapConfig::default().with_planner(planner);
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(config.planner(), planner);
    }
    for planner in Planner::ALL {
        assert_eq!(planner.name().parse(), Ok(planner));
        let read = SwapConfig::default()
            .with_vars(|name| (name == "BURN_SWAP_PLANNER").then(|| planner.name().into()))
            .unwrap();
        assert_eq!(read.planner(), planner);
    }
    let error = SwapConfig::default()
        .with_vars(|name| (name == "BURN_SWAP_PLANNER").then(|| "genetic".into()))
        .unwrap_err();
    assert!(
        error.to_string().contains("BURN_SWAP_PLANNER") && error.to_string().contains("genetic"),
        "{error}"
    );
}

#[test]
fn every_choice_reads_back_from_its_text() {
    for policy in Policy::ALL {
        assert_eq!(policy.to_string().parse::<Policy>().unwrap(), policy);
    }
    for planner in Planner::ALL {
        assert_eq!(planner.to_string().parse::<Planner>().unwrap(), planner);
    }
    for eviction in EvictionScore::ALL {
        assert_eq!(
            eviction.to_string().parse::<EvictionScore>().unwrap(),
            eviction
        );
    }
    for (compression, text) in [
        (Compression::Off, "off"),
        (
            Compression::On {
                max_ratio: Compression::DEFAULT_MAX_RATIO,
            },
            "on",
        ),
        (Compression::On { max_ratio: 0.7 }, "on:0.7"),
        (Compression::Auto { max_ratio: 0.5 }, "auto:0.5"),
    ] {
        assert_eq!(compression.to_string(), text);
        assert_eq!(text.parse::<Compression>().unwrap(), compression);
    }
    assert!("most-recent".parse::<EvictionScore>().is_err());
}
