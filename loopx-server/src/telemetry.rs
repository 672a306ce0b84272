//! The optional export of the service's `tracing` spans — `delivery`, `poll`, `judge`,
//! `commit` and the request spans — to an OpenTelemetry collector over OTLP/HTTP (protobuf).
//!
//! The export is built only with the crate's `otel` feature; without it [`Otlp::new`] says so
//! with [`TelemetryError::NotBuilt`], so a host can refuse a configured endpoint instead of
//! silently dropping its spans.

/// The standard variable that names the collector's base URL (the traces go to
/// `BASE/v1/traces`), as every OpenTelemetry SDK reads it.
pub const OTLP_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// The `service.name` the exported spans carry.
pub const SERVICE_NAME: &str = "loopx";

/// Why the export could not be started or flushed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// This build has no `otel` feature, so nothing can be exported.
    #[error("this build of loopx has no OpenTelemetry export (built without the `otel` feature)")]
    NotBuilt,
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("the OTLP endpoint `{0}` is not an http:// or https:// URL")]
    Endpoint(String),
    /// The exporter could not be built.
    #[error("the OTLP exporter could not be built: {0}")]
    Exporter(String),
    /// The spans still buffered could not be flushed at shutdown.
    #[error("the OTLP export could not flush its spans: {0}")]
    Flush(String),
}

/// The traces URL of a collector's base URL: `BASE/v1/traces`, as `OTEL_EXPORTER_OTLP_ENDPOINT`
/// is read by OpenTelemetry's SDKs.
///
/// # Errors
/// [`TelemetryError::Endpoint`] when `base` is not an `http://` or `https://` URL.
pub fn traces_url(base: &str) -> Result<String, TelemetryError> {
    let base = base.trim();
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(TelemetryError::Endpoint(base.to_owned()));
    }
    Ok(format!("{}/v1/traces", base.trim_end_matches('/')))
}

/// A running export of spans to one collector; [`Otlp::shutdown`] flushes what is buffered.
#[derive(Debug)]
pub struct Otlp {
    #[cfg(feature = "otel")]
    provider: opentelemetry_sdk::trace::SdkTracerProvider,
}

#[cfg(feature = "otel")]
impl Otlp {
    /// Starts exporting to the collector at the base URL `endpoint` (spans in batches, on the
    /// batch processor's own thread).
    ///
    /// # Errors
    /// [`TelemetryError::Endpoint`] for a URL that is not HTTP; [`TelemetryError::Exporter`]
    /// when the exporter cannot be built.
    pub fn new(endpoint: &str) -> Result<Otlp, TelemetryError> {
        use opentelemetry_otlp::WithExportConfig as _;
        let url = traces_url(endpoint)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(url)
            .build()
            .map_err(|error| TelemetryError::Exporter(error.to_string()))?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(SERVICE_NAME)
            .build();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        Ok(Otlp { provider })
    }

    /// The `tracing` layer that hands every closed span to this export.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        use opentelemetry::trace::TracerProvider as _;
        tracing_opentelemetry::layer().with_tracer(self.provider.tracer(SERVICE_NAME))
    }

    /// Flushes the buffered spans and stops the export (blocking until the collector answered
    /// or the exporter's timeout passed).
    ///
    /// # Errors
    /// [`TelemetryError::Flush`] when the buffered spans could not be sent.
    pub fn shutdown(self) -> Result<(), TelemetryError> {
        self.provider
            .shutdown()
            .map_err(|error| TelemetryError::Flush(error.to_string()))
    }
}

#[cfg(not(feature = "otel"))]
impl Otlp {
    /// Without the `otel` feature there is no export: always [`TelemetryError::NotBuilt`]
    /// (after the endpoint's own check).
    ///
    /// # Errors
    /// [`TelemetryError::Endpoint`] for a URL that is not HTTP, else
    /// [`TelemetryError::NotBuilt`].
    pub fn new(endpoint: &str) -> Result<Otlp, TelemetryError> {
        traces_url(endpoint)?;
        Err(TelemetryError::NotBuilt)
    }

    /// Nothing to flush without the `otel` feature.
    ///
    /// # Errors
    /// Never.
    pub fn shutdown(self) -> Result<(), TelemetryError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_url_follows_the_standard_variable() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318/").ok().as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        assert!(matches!(
            traces_url("127.0.0.1:4318"),
            Err(TelemetryError::Endpoint(_))
        ));
    }
}
