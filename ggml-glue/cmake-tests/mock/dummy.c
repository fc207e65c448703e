int ggml_t2p_mock;
