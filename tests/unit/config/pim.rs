//! Unit tests of `blis_cosim::config::pim`.

use blis_cosim::config::PimDevice;

/// The keys of LLMServingSim's `DDR4_8GB_3200_pim.ini` that the model reads.
const DDR4: &str = "[dram_structure]\nprotocol = DDR4\nbankgroups = 2\nbanks_per_group = 4\n\
        rows = 65536\ncolumns = 1024\ndevice_width = 16\n\n[timing]\ntCK = 0.63\nCL = 22\n\n\
        [system]\nchannel_size = 8192\nbus_width = 64\n\n[other]\n\
        data_rate = 3200 # MT/s\nidle_power = 623 # mW\npeak_power = 3803 # mW\n";

#[test]
fn the_ddr4_facts_come_out_of_its_ini() {
    // A rank: 64/16 = 4 devices of 8 banks of 2048 B pages × 64 Ki rows = 128 MiB a
    // bank, 4096 MiB a rank; the channel holds 8192 MiB (2 ranks) = 8 GiB.
    let d = PimDevice::parse(DDR4, "DDR4_8GB_3200_pim", "DDR4_8GB_3200_pim.ini").unwrap();
    assert_eq!(d.channel_gib, 8.0);
    assert_eq!(d.channel_bw_gbps, 25.6);
    assert_eq!(d.read_latency_ns, 22.0 * 0.63);
    assert_eq!((d.idle_power_w, d.peak_power_w), (0.623, 3.803));
    assert_eq!((d.slope_ns, d.intercept_ns), (333.2538, 30675.2739));
    assert_eq!(d.channels(512.0), 64);
    assert_eq!(d.channels(60.0), 7);
}

#[test]
fn a_channel_holds_at_least_one_rank() {
    // channel_size 1024 MiB < a 4096 MiB rank: the channel is one rank.
    let ini = DDR4.replace("channel_size = 8192", "channel_size = 1024");
    let d = PimDevice::parse(&ini, "DDR4_8GB_3200_pim", "x.ini").unwrap();
    assert_eq!(d.channel_gib, 4.0);
}

#[test]
fn bad_inis_name_the_file_line_and_key() {
    let stem = "DDR4_8GB_3200_pim";
    let err = |ini: &str, stem: &str| {
        PimDevice::parse(ini, stem, "pim/DDR4.ini")
            .unwrap_err()
            .to_string()
    };
    let missing = err(&DDR4.replace("CL = 22\n", ""), stem);
    assert!(
        missing.contains("pim/DDR4.ini") && missing.contains("`CL`") && missing.contains("missing"),
        "{missing}"
    );
    let bad = err(&DDR4.replace("tCK = 0.63", "tCK = fast"), stem);
    assert!(
        bad.contains("pim/DDR4.ini")
            && bad.contains("line 10: field `tCK`")
            && bad.contains("`fast`"),
        "{bad}"
    );
    let zero = err(&DDR4.replace("bus_width = 64", "bus_width = 0"), stem);
    assert!(
        zero.contains("bus_width") && zero.contains("positive"),
        "{zero}"
    );
    let garbage = err(&format!("{DDR4}oops\n"), stem);
    assert!(
        garbage.contains("line 21:") && garbage.contains("key = value"),
        "{garbage}"
    );
    let unknown = err(DDR4, "DDR5_16GB_pim");
    assert!(
        unknown.contains("PIM memory type")
            && unknown.contains("got `DDR5_16GB_pim`")
            && unknown.contains("HBM2_1GB_2000_pim"),
        "{unknown}"
    );
}

#[test]
fn the_ini_is_found_beside_the_cluster_configs_or_in_the_given_folder() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("cluster");
    let pim = dir.path().join("pim");
    std::fs::create_dir_all(&cluster).unwrap();
    std::fs::create_dir_all(&pim).unwrap();
    std::fs::write(pim.join("DDR4_8GB_3200_pim.ini"), DDR4).unwrap();
    let config = cluster.join("c.json");
    let found = PimDevice::locate("DDR4_8GB_3200_pim", &config, None).unwrap();
    assert_eq!(
        found,
        cluster.join("..").join("pim").join("DDR4_8GB_3200_pim.ini")
    );
    let err = PimDevice::locate("HBM2_1GB_2000_pim", &config, Some(&cluster))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!(
            "tried {}",
            cluster.join("HBM2_1GB_2000_pim.ini").display()
        )),
        "{err}"
    );
}
