# The mur image: a static binary on scratch, so it builds with no image registry.
#
#   CGO_ENABLED=0 go build -trimpath -o dist/mur ./cmd/mur
#   docker build -t mur .
#
# The data directory (task stores, tokens, workdirs) is a volume; the process runs as a non-root user.
FROM scratch
COPY dist/mur /mur
USER 65532:65532
ENV MUR_DATA_DIR=/data MUR_RECORDS_DIR=/data/records HOME=/data
VOLUME ["/data"]
EXPOSE 7101
ENTRYPOINT ["/mur"]
CMD ["--help"]
