//! On-demand prices from the AWS Price List API, the way Karpenter's pricing provider reads them.
//!
//! Data flow: [`on_demand_prices`] asks `GetProducts` (service `AmazonEC2`) two questions, each
//! with Karpenter's filter set for Linux on-demand capacity in one region (`regionCode`,
//! `serviceCode`, `preInstalledSw=NA`, `operatingSystem=Linux`, `capacitystatus=Used`,
//! `marketoption=OnDemand`): shared-tenancy compute instances, then bare-metal instances, which the
//! price list files under dedicated tenancy. It follows `NextToken` to the last page of each. Every
//! `PriceList` entry is a JSON document of its own; [`parse_entry`] takes
//! `product.attributes.instanceType` and the single hourly `pricePerUnit` of its OnDemand terms. An
//! entry that cannot be read is skipped and counted by reason in the [`PricingReport`], never
//! fatal: one odd product must not cost the whole price list. A type whose entries disagree on its
//! price is dropped rather than priced by whichever came last.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use aws_sdk_pricing::types::{Filter, FilterType};
use serde::{Deserialize, Serialize};

use super::AwsError;

const CALL: &str = "pricing:GetProducts";
/// The Price List service code of EC2.
pub const SERVICE_CODE: &str = "AmazonEC2";
/// Page size; the API allows at most 100.
const PAGE_SIZE: i32 = 100;
/// A bound on pages per query, far above the real price list (a few thousand products per region),
/// so that an endpoint handing out fresh tokens forever cannot hang discovery.
const MAX_PAGES: usize = 1000;

/// The two product families Karpenter prices: shared-tenancy instances, and bare-metal instances,
/// which the price list files under `Dedicated` tenancy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProductQuery {
    Shared,
    BareMetal,
}

impl ProductQuery {
    pub const ALL: [ProductQuery; 2] = [ProductQuery::Shared, ProductQuery::BareMetal];

    /// The (field, value) TERM_MATCH filters of this query for `region`, in the order they are
    /// sent.
    pub fn filters(self, region: &str) -> Vec<(&'static str, String)> {
        let (tenancy, family) = match self {
            ProductQuery::Shared => ("Shared", "Compute Instance"),
            ProductQuery::BareMetal => ("Dedicated", "Compute Instance (bare metal)"),
        };
        [
            ("regionCode", region),
            ("serviceCode", SERVICE_CODE),
            ("preInstalledSw", "NA"),
            ("operatingSystem", "Linux"),
            ("capacitystatus", "Used"),
            ("marketoption", "OnDemand"),
            ("tenancy", tenancy),
            ("productFamily", family),
        ]
        .into_iter()
        .map(|(field, value)| (field, value.to_string()))
        .collect()
    }

    fn sdk_filters(self, region: &str) -> Result<Vec<Filter>, AwsError> {
        let filter = |(field, value): (&str, String)| {
            Filter::builder()
                .r#type(FilterType::TermMatch)
                .field(field)
                .value(value)
                .build()
                .map_err(|e| AwsError::Settings(format!("pricing filter {field}: {e}")))
        };
        self.filters(region).into_iter().map(filter).collect()
    }
}

/// Why a price list entry was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// Not JSON, or JSON of another shape (a field of the wrong type).
    Malformed,
    /// No `product.attributes.instanceType`.
    NoInstanceType,
    /// No OnDemand price dimension in hours with a price in the region's currency.
    NoHourlyPrice,
    /// A price that is not a positive number.
    BadPrice,
    /// One entry with several distinct hourly prices.
    SeveralPrices,
    /// The entry's type has other entries at a different price; the type is left out.
    ConflictingPrices,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Malformed => "malformed",
            SkipReason::NoInstanceType => "no instance type",
            SkipReason::NoHourlyPrice => "no hourly on-demand price",
            SkipReason::BadPrice => "price not a positive number",
            SkipReason::SeveralPrices => "several prices in one entry",
            SkipReason::ConflictingPrices => "type priced differently by another entry",
        }
    }
}

/// What the price list gave: pages and entries read, entries used, entries skipped by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PricingReport {
    pub region: String,
    pub pages: usize,
    pub entries: usize,
    /// Entries that gave a type and a price (before conflicting types were dropped).
    pub parsed: usize,
    pub skipped: BTreeMap<SkipReason, usize>,
    /// Types left out because their entries disagree on the price.
    pub conflicting_types: Vec<String>,
    /// Types priced in the result.
    pub types: usize,
}

impl PricingReport {
    pub fn skipped_total(&self) -> usize {
        self.skipped.values().sum()
    }

    fn skip(&mut self, reason: SkipReason, entries: usize) {
        *self.skipped.entry(reason).or_default() += entries;
    }
}

impl fmt::Display for PricingReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "on-demand prices {}: {} types from {} price list entries on {} pages ({} parsed, {} skipped)",
            self.region,
            self.types,
            self.entries,
            self.pages,
            self.parsed,
            self.skipped_total()
        )?;
        for (reason, n) in &self.skipped {
            write!(f, "\n  skipped, {}: {n}", reason.as_str())?;
        }
        if !self.conflicting_types.is_empty() {
            write!(
                f,
                "\n  types with conflicting prices: {}",
                self.conflicting_types.join(", ")
            )?;
        }
        Ok(())
    }
}

/// The region's on-demand Linux prices ($/h, or CNY/h in China) by instance type, read from every
/// page of both product queries. `client` must point at the pricing region that serves `region`
/// ([`super::clients::pricing_region`]). An empty result is an error: a catalog priced from nothing
/// would silently leave every type out.
pub async fn on_demand_prices(
    client: &aws_sdk_pricing::Client,
    region: &str,
) -> Result<(BTreeMap<String, f64>, PricingReport), AwsError> {
    let mut collector = Collector::new(region);
    for query in ProductQuery::ALL {
        fetch_query(client, region, query, &mut collector).await?;
    }
    let (prices, report) = collector.finish();
    if prices.is_empty() {
        let message = format!("has no usable on-demand price for region {region}: {report}");
        return Err(AwsError::Response {
            call: CALL,
            message,
        });
    }
    Ok((prices, report))
}

/// Reads all pages of one query into `collector`.
async fn fetch_query(
    client: &aws_sdk_pricing::Client,
    region: &str,
    query: ProductQuery,
    collector: &mut Collector,
) -> Result<(), AwsError> {
    let filters = query.sdk_filters(region)?;
    let mut token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let page = client
            .get_products()
            .service_code(SERVICE_CODE)
            .set_filters(Some(filters.clone()))
            .format_version("aws_v1")
            .max_results(PAGE_SIZE)
            .set_next_token(token.clone())
            .send()
            .await
            .map_err(|e| AwsError::from_sdk(CALL, e))?;
        collector.add_page(page.price_list());
        match page.next_token().filter(|t| !t.is_empty()) {
            // A token handed back unchanged would ask for the same page forever.
            Some(next) if token.as_deref() == Some(next) => {
                return Err(AwsError::Response {
                    call: CALL,
                    message: format!("repeats next token {next:?}"),
                });
            }
            Some(next) => token = Some(next.to_string()),
            None => return Ok(()),
        }
    }
    Err(AwsError::Response {
        call: CALL,
        message: format!("has more than {MAX_PAGES} pages for {query:?}"),
    })
}

/// Accumulates parsed entries; distinct prices for one type are resolved in [`Collector::finish`].
struct Collector {
    currency: &'static str,
    /// type -> (prices seen, entries seen)
    seen: BTreeMap<String, (BTreeSet<PriceKey>, usize)>,
    report: PricingReport,
}

/// An f64 price as an orderable key; prices are finite and positive here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct PriceKey(u64);

impl Collector {
    fn new(region: &str) -> Collector {
        let report = PricingReport {
            region: region.to_string(),
            ..Default::default()
        };
        Collector {
            currency: currency(region),
            seen: BTreeMap::new(),
            report,
        }
    }

    fn add_page(&mut self, entries: &[String]) {
        self.report.pages += 1;
        for entry in entries {
            self.report.entries += 1;
            match parse_entry(entry, self.currency) {
                Ok((name, price)) => {
                    self.report.parsed += 1;
                    let (prices, n) = self.seen.entry(name).or_default();
                    prices.insert(PriceKey(price.to_bits()));
                    *n += 1;
                }
                Err(reason) => self.report.skip(reason, 1),
            }
        }
    }

    fn finish(mut self) -> (BTreeMap<String, f64>, PricingReport) {
        let mut out = BTreeMap::new();
        for (name, (prices, entries)) in self.seen {
            match prices.first() {
                Some(p) if prices.len() == 1 => _ = out.insert(name, f64::from_bits(p.0)),
                _ => {
                    self.report.skip(SkipReason::ConflictingPrices, entries);
                    self.report.conflicting_types.push(name);
                }
            }
        }
        self.report.types = out.len();
        (out, self.report)
    }
}

/// The currency the price list quotes the region in.
fn currency(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "CNY"
    } else {
        "USD"
    }
}

// ---- one price list entry: only the fields used; serde ignores the rest ----

#[derive(Deserialize)]
struct Entry {
    product: Option<Product>,
    #[serde(default)]
    terms: Terms,
}

#[derive(Deserialize)]
struct Product {
    attributes: Option<Attributes>,
}

#[derive(Deserialize)]
struct Attributes {
    #[serde(rename = "instanceType")]
    instance_type: Option<String>,
}

#[derive(Default, Deserialize)]
struct Terms {
    #[serde(rename = "OnDemand", default)]
    on_demand: BTreeMap<String, Term>,
}

#[derive(Deserialize)]
struct Term {
    #[serde(rename = "priceDimensions", default)]
    price_dimensions: BTreeMap<String, Dimension>,
}

#[derive(Deserialize)]
struct Dimension {
    unit: Option<String>,
    #[serde(rename = "pricePerUnit", default)]
    price_per_unit: BTreeMap<String, String>,
}

/// The instance type and hourly on-demand price in `currency` of one `PriceList` entry.
pub fn parse_entry(text: &str, currency: &str) -> Result<(String, f64), SkipReason> {
    let entry: Entry = serde_json::from_str(text).map_err(|_| SkipReason::Malformed)?;
    let name = entry
        .product
        .and_then(|p| p.attributes)
        .and_then(|a| a.instance_type)
        .filter(|n| !n.trim().is_empty())
        .ok_or(SkipReason::NoInstanceType)?;
    let mut prices = BTreeSet::new();
    let hourly = entry
        .terms
        .on_demand
        .values()
        .flat_map(|t| t.price_dimensions.values());
    for dim in hourly.filter(|d| d.unit.as_deref() == Some("Hrs")) {
        let Some(text) = dim.price_per_unit.get(currency) else {
            continue;
        };
        let price: f64 = text.trim().parse().map_err(|_| SkipReason::BadPrice)?;
        if !price.is_finite() || price <= 0.0 {
            return Err(SkipReason::BadPrice);
        }
        prices.insert(PriceKey(price.to_bits()));
    }
    match (prices.first(), prices.len()) {
        (Some(p), 1) => Ok((name, f64::from_bits(p.0))),
        (None, _) => Err(SkipReason::NoHourlyPrice),
        _ => Err(SkipReason::SeveralPrices),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_pricing::config::http::{HttpRequest, HttpResponse};
    use aws_sdk_pricing::config::{BehaviorVersion, Credentials, Region};
    use aws_smithy_http_client::test_util::{ReplayEvent, StaticReplayClient};
    use aws_smithy_types::body::SdkBody;
    use std::path::PathBuf;

    fn fixture(name: &str) -> String {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/aws/pricing")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// One exchange: the request we expect (body from `request`) and the stored response
    /// `response`.
    fn event(request: &str, response: &str) -> ReplayEvent {
        let mut req = HttpRequest::new(SdkBody::from(fixture(request)));
        req.set_uri("https://api.pricing.us-east-1.amazonaws.com/")
            .expect("uri");
        req.headers_mut()
            .insert("x-amz-target", "AWSPriceListService.GetProducts");
        req.headers_mut()
            .insert("content-type", "application/x-amz-json-1.1");
        let mut resp = HttpResponse::new(
            200u16.try_into().expect("status"),
            SdkBody::from(fixture(response)),
        );
        resp.headers_mut()
            .insert("content-type", "application/x-amz-json-1.1");
        ReplayEvent::new(req, resp)
    }

    fn client(http: &StaticReplayClient) -> aws_sdk_pricing::Client {
        let conf = aws_sdk_pricing::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("AKIDTEST", "secret", None, None, "test"))
            .http_client(http.clone())
            .build();
        aws_sdk_pricing::Client::from_conf(conf)
    }

    /// The three recorded exchanges: shared page 1 (with a NextToken), shared page 2 (malformed
    /// entries, last page), bare-metal page 1 (last page).
    fn three_pages() -> StaticReplayClient {
        StaticReplayClient::new(vec![
            event("request-shared-1.json", "shared-page-1.json"),
            event("request-shared-2.json", "shared-page-2.json"),
            event("request-metal-1.json", "metal-page-1.json"),
        ])
    }

    #[tokio::test]
    async fn all_pages_of_both_queries_are_read_with_karpenters_filters() {
        let http = three_pages();
        let (prices, report) = on_demand_prices(&client(&http), "us-east-1")
            .await
            .expect("prices");
        // URI, X-Amz-Target and the JSON bodies (filters, NextToken of the previous page) must
        // match.
        http.relaxed_requests_match();
        // Real us-east-1 prices (see fixtures/aws/pricing/README.md).
        for (name, price) in [
            ("m5.large", 0.096),
            ("m6g.large", 0.077),
            ("c7g.xlarge", 0.145),
            ("m5.metal", 4.608),
        ] {
            assert_eq!(prices.get(name), Some(&price), "{name}");
        }
        assert_eq!((report.pages, report.types), (3, prices.len()));
    }

    #[tokio::test]
    async fn malformed_entries_are_skipped_and_counted_by_reason() {
        let http = three_pages();
        let (prices, report) = on_demand_prices(&client(&http), "us-east-1")
            .await
            .expect("prices");
        let names: Vec<&str> = prices.keys().map(String::as_str).collect();
        // c5.large is priced 0.085 on page 1 and 0.09 on page 2: left out. t3.micro twice at one
        // price: kept.
        assert_eq!(
            names,
            [
                "c7g.xlarge",
                "m5.large",
                "m5.metal",
                "m6g.large",
                "m6g.metal",
                "p5.48xlarge",
                "t3.micro"
            ]
        );
        assert_eq!(report.conflicting_types, ["c5.large"]);
        let skipped: Vec<(SkipReason, usize)> =
            report.skipped.iter().map(|(r, n)| (*r, *n)).collect();
        assert_eq!(
            skipped,
            [
                (SkipReason::Malformed, 2),
                (SkipReason::NoInstanceType, 1),
                (SkipReason::NoHourlyPrice, 2),
                (SkipReason::BadPrice, 3),
                (SkipReason::SeveralPrices, 1),
                (SkipReason::ConflictingPrices, 2),
            ]
        );
        assert_eq!((report.entries, report.parsed), (19, 10));
        assert_eq!(report.entries, report.parsed + report.skipped_total() - 2);
        assert!(
            report
                .to_string()
                .contains("skipped, price not a positive number: 3"),
            "{report}"
        );
    }

    #[tokio::test]
    async fn an_api_error_is_an_aws_error_with_its_code() {
        let mut resp = HttpResponse::new(
            400u16.try_into().expect("status"),
            SdkBody::from(r#"{"__type":"InvalidParameterException","message":"bad filter"}"#),
        );
        resp.headers_mut()
            .insert("content-type", "application/x-amz-json-1.1");
        let req = HttpRequest::new(SdkBody::from("{}"));
        let http = StaticReplayClient::new(vec![ReplayEvent::new(req, resp)]);
        let err = on_demand_prices(&client(&http), "us-east-1")
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some("InvalidParameterException"), "{err}");
        assert!(
            err.to_string().starts_with("pricing:GetProducts: "),
            "{err}"
        );
    }

    #[test]
    fn a_price_list_without_usable_prices_is_an_error() {
        let mut c = Collector::new("us-east-1");
        c.add_page(&["{}".to_string()]);
        let (prices, report) = c.finish();
        assert!(prices.is_empty());
        assert_eq!(report.skipped.get(&SkipReason::NoInstanceType), Some(&1));
    }

    #[test]
    fn entries_are_parsed_strictly() {
        let entry = |unit: &str, prices: &str| {
            format!(
                r#"{{"product":{{"attributes":{{"instanceType":"m5.large"}}}},"terms":{{"OnDemand":{{"T":{{"priceDimensions":{{"D":{{"unit":"{unit}","pricePerUnit":{prices}}}}}}}}}}}}}"#
            )
        };
        assert_eq!(
            parse_entry(&entry("Hrs", r#"{"USD":"0.0960000000"}"#), "USD"),
            Ok(("m5.large".into(), 0.096))
        );
        assert_eq!(
            parse_entry(&entry("Hrs", r#"{"CNY":"0.7"}"#), "CNY"),
            Ok(("m5.large".into(), 0.7))
        );
        assert_eq!(
            parse_entry(&entry("Hrs", r#"{"CNY":"0.7"}"#), "USD"),
            Err(SkipReason::NoHourlyPrice)
        );
        assert_eq!(
            parse_entry(&entry("Quantity", r#"{"USD":"1"}"#), "USD"),
            Err(SkipReason::NoHourlyPrice)
        );
        assert_eq!(
            parse_entry(&entry("Hrs", r#"{"USD":"NaN"}"#), "USD"),
            Err(SkipReason::BadPrice)
        );
        assert_eq!(
            parse_entry(&entry("Hrs", r#"{"USD":"inf"}"#), "USD"),
            Err(SkipReason::BadPrice)
        );
        assert_eq!(
            parse_entry(&entry("Hrs", r#"{"USD":0.1}"#), "USD"),
            Err(SkipReason::Malformed)
        );
        assert_eq!(parse_entry("[]", "USD"), Err(SkipReason::Malformed));
    }

    #[test]
    fn filters_are_karpenters_for_each_query() {
        let shared = ProductQuery::Shared.filters("eu-west-1");
        assert_eq!(shared[0], ("regionCode", "eu-west-1".to_string()));
        assert!(
            shared.contains(&("tenancy", "Shared".into()))
                && shared.contains(&("capacitystatus", "Used".into()))
        );
        let metal = ProductQuery::BareMetal.filters("eu-west-1");
        assert!(metal.contains(&("productFamily", "Compute Instance (bare metal)".into())));
        assert_eq!(currency("cn-north-1"), "CNY");
    }
}
