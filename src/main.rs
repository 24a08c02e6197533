fn main() -> anyhow::Result<()> {
    print!("{}", promoter::crd::cluster_promotion_crd_yaml()?);
    Ok(())
}
