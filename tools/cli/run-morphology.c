/* Placeholder: nitrix run rows for morphology are being written. */
typedef int nx_placeholder_run_morphology;
